package watcher

import (
	"encoding/binary"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// completions reports the files of a directory whose content is whole: closed after
// being written (IN_CLOSE_WRITE) or renamed into the directory (IN_MOVED_TO), and the
// files deleted (IN_DELETE: unlinked, as rm does; not renamed away, as editors do with
// the original on saving). fsnotify reports neither a close nor a rename into place as
// such. A scan at such an event need not wait for the burst of events to settle (see
// Watcher.Run).
type completions struct {
	f  *os.File // the inotify instance, read through Go's poller so that Close ends read
	fd int
	C  chan completion // a full channel drops them: the settled scan sees the files anyway
}

// completion is a file of the directory that is whole, or gone.
type completion struct {
	name string
	gone bool // deleted
}

// newCompletions starts reading an inotify instance; watch adds the directory.
func newCompletions() (*completions, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	c := &completions{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, C: make(chan completion, 64)}
	go c.read()
	return c, nil
}

// watch watches dir, again after it was replaced; watching it twice changes nothing.
func (c *completions) watch(dir string) {
	unix.InotifyAddWatch(c.fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_DELETE|unix.IN_ONLYDIR)
}

// Close stops the reading.
func (c *completions) Close() error { return c.f.Close() }

// read sends the name of every file completed until the instance is closed.
func (c *completions) read() {
	buf := make([]byte, 64*1024)
	for {
		n, err := c.f.Read(buf)
		if err != nil {
			return
		}
		for _, ev := range events(buf[:n]) {
			select {
			case c.C <- ev:
			default:
			}
		}
	}
}

// events decodes a buffer of inotify events: each a struct inotify_event (wd, mask,
// cookie, len: four 32-bit words) followed by len bytes of NUL-padded name.
func events(buf []byte) []completion {
	var out []completion
	for len(buf) >= unix.SizeofInotifyEvent {
		mask := binary.NativeEndian.Uint32(buf[4:8])
		n := int(binary.NativeEndian.Uint32(buf[12:16]))
		if len(buf) < unix.SizeofInotifyEvent+n {
			break
		}
		if name := strings.TrimRight(string(buf[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+n]), "\x00"); name != "" {
			out = append(out, completion{name: name, gone: mask&unix.IN_DELETE != 0})
		}
		buf = buf[unix.SizeofInotifyEvent+n:]
	}
	return out
}
