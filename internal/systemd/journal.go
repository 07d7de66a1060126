package systemd

import (
	"fmt"
	"log/slog"
	"os"
	"syscall"
)

// ToJournal reports whether f is the journal's stream that systemd names in
// JOURNAL_STREAM ("<device>:<inode>"): a child whose stderr was redirected
// elsewhere inherits the variable, but not the stream.
func ToJournal(f *os.File, stream string) bool {
	var dev, ino uint64
	if _, err := fmt.Sscanf(stream, "%d:%d", &dev, &ino); err != nil {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && st.Ino == ino
}

// DropTime removes the time of a record, for a handler whose lines go to the journal,
// which stamps them itself.
func DropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
