package systemd

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Under systemd, with stderr the journal's stream, text lines carry no time: the
// journal stamps them. Elsewhere, or with stderr sent elsewhere, they do.
func TestJournalLinesCarryNoTime(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	stream := fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	if !ToJournal(f, stream) {
		t.Errorf("ToJournal(%s) = false for the stream itself", stream)
	}
	if ToJournal(os.Stdin, stream) || ToJournal(f, "") || ToJournal(f, "1:2") {
		t.Error("ToJournal = true for another file or no JOURNAL_STREAM")
	}
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: DropTime})).Info("staticpod started", "at", time.Unix(0, 0).UTC())
	if got := b.String(); strings.HasPrefix(got, "time=") || !strings.Contains(got, "at=1970-01-01") {
		t.Errorf("line = %q: want no record time, attributes kept", got)
	}
}
