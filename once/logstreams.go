package once

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/logs"
	"github.com/staticpod/staticpod/manifests"
)

const (
	// quietFor is how long a log file must stop growing, once its container has exited,
	// before its follower stops: the logger process may still be writing the container's
	// last output, and logs.Read looks for new lines every 100 ms.
	quietFor = 500 * time.Millisecond
	// quietMax bounds that wait, for a container that still runs (--keep).
	quietMax = 3 * time.Second
)

// logStreams prints the lines of every container of the run, each prefixed
// "pod/container | ", following each attempt's CRI log file from its start. An app
// container's lines are printed once its pod's init containers' lines are all out.
// Its methods are called from one goroutine; the followers only write to out.
type logStreams struct {
	dir       string
	out       *lockedWriter
	errOut    io.Writer
	followers map[string]*follower // by pod UID/container/attempt
	wg        sync.WaitGroup       // the followers' goroutines
}

// follower prints one log file until told to finish and the file has gone quiet.
type follower struct {
	container string // pod UID/container name, to find a container's followers
	finishing chan struct{}
	once      sync.Once
	done      chan struct{} // closed when it stopped printing
}

func (f *follower) finish() { f.once.Do(func() { close(f.finishing) }) }

func newLogStreams(dir string, out, errOut io.Writer) *logStreams {
	return &logStreams{dir: dir, out: &lockedWriter{w: out}, errOut: errOut, followers: map[string]*follower{}}
}

// sync starts a follower for each attempt that has a log file and tells those of
// attempts that ended to finish. It returns how many followers it started.
func (l *logStreams) sync(pods []*corev1.Pod) int {
	started := 0
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		initsOut := true
		for _, cs := range pod.Status.InitContainerStatuses {
			started += l.syncContainer(pod, cs)
			if !isSidecarOf(pod, cs.Name) && !l.drained(pod.UID, cs.Name) {
				initsOut = false
			}
		}
		if !initsOut {
			continue
		}
		for _, cs := range pod.Status.ContainerStatuses {
			started += l.syncContainer(pod, cs)
		}
	}
	return started
}

func (l *logStreams) syncContainer(pod *corev1.Pod, cs corev1.ContainerStatus) int {
	started := 0
	for attempt := 0; attempt <= int(cs.RestartCount); attempt++ {
		key := string(pod.UID) + "/" + cs.Name + "/" + strconv.Itoa(attempt)
		f, ok := l.followers[key]
		if !ok {
			path := logs.ContainerPath(l.dir, pod.Namespace, pod.Name, string(pod.UID), cs.Name, attempt)
			if _, err := os.Stat(path); err != nil {
				continue
			}
			f = l.follow(path, pod.Name+"/"+cs.Name+" | ", string(pod.UID)+"/"+cs.Name)
			l.followers[key] = f
			started++
		}
		ended := cs.State.Running == nil && (cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil)
		if attempt < int(cs.RestartCount) || ended {
			f.finish()
		}
	}
	return started
}

// drained reports whether every follower of a container has stopped.
func (l *logStreams) drained(uid types.UID, container string) bool {
	for _, f := range l.followers {
		if f.container != string(uid)+"/"+container {
			continue
		}
		select {
		case <-f.done:
		default:
			return false
		}
	}
	return true
}

// follow starts printing the log file at path.
func (l *logStreams) follow(path, prefix, container string) *follower {
	f := &follower{container: container, finishing: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		defer close(f.done)
		defer cancel()
		w := &prefixedLines{out: l.out, prefix: prefix}
		if err := logs.Read(ctx, path, logs.ReadOptions{Tail: -1, Follow: true}, w); err != nil {
			fmt.Fprintf(l.errOut, "staticpod once: %v\n", err)
		}
	}()
	go func() {
		defer l.wg.Done()
		select {
		case <-f.finishing:
			awaitQuiet(path, f.done)
			cancel()
		case <-f.done:
		}
	}()
	return f
}

// finish prints what is left of every container's output, up to its end, and stops
// following. Held back app containers start once their init containers are out.
func (l *logStreams) finish(pods []*corev1.Pod) {
	for {
		started := l.sync(pods)
		for _, f := range l.followers {
			f.finish()
		}
		l.wg.Wait()
		if started == 0 && l.sync(pods) == 0 {
			return
		}
	}
}

// awaitQuiet returns once the file at path has not grown for quietFor, after quietMax,
// or when done is closed.
func awaitQuiet(path string, done <-chan struct{}) {
	const poll = 100 * time.Millisecond
	tick := time.NewTicker(poll)
	defer tick.Stop()
	deadline := time.Now().Add(quietMax)
	size, still := int64(-1), time.Duration(0)
	for still < quietFor && time.Now().Before(deadline) {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		info, err := os.Stat(path)
		if err != nil {
			return
		}
		if info.Size() == size {
			still += poll
		} else {
			size, still = info.Size(), 0
		}
	}
}

// lockedWriter serializes the writes of several followers.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// prefixedLines writes each line it is given with a prefix, as one write. logs.Read
// gives it one line per call; a line cut short is ended with a newline.
type prefixedLines struct {
	out    io.Writer
	prefix string
}

func (p *prefixedLines) Write(b []byte) (int, error) {
	var buf []byte
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			buf = append(append(buf, p.prefix...), line...)
		}
	}
	if len(buf) > 0 && buf[len(buf)-1] != '\n' {
		buf = append(buf, '\n')
	}
	if _, err := p.out.Write(buf); err != nil {
		return 0, err
	}
	return len(b), nil
}

func isSidecarOf(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return manifests.IsSidecar(&c)
		}
	}
	return false
}
