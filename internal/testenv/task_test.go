package testenv_test

import (
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/staticpod/staticpod/internal/testenv"
)

// RunTask returns with everything the task wrote, however far behind its exit the copy
// of its output is: here the copy is held at its first write until RunTask either
// waits for it or cancels it. The output fits in the FIFO, so the task exits while the
// copy is held.
func TestRunTaskKeepsTheOutputTheCopyHasNotReadAtExit(t *testing.T) {
	d := ctd.Daemon(t)
	ns := d.Namespace(t)
	ctx := d.Context(t, ns)
	image := d.MustImportImage(t, ns, testenv.ImageOptions{Ref: testRef})
	out := &heldWriter{held: make(chan struct{})}
	release := sync.OnceFunc(func() { close(out.held) })
	streams := cio.NewCreator(cio.WithStreams(nil, out, io.Discard), cio.WithFIFODir(d.FIFODir()))
	creator := func(id string) (cio.IO, error) {
		inner, err := streams(id)
		if err != nil {
			return nil, err
		}
		return &heldIO{IO: inner, release: release}, nil
	}
	task := mustCreateTask(t, ctx, d, image, "held", creator, oci.WithProcessArgs("seq", "1", "10000"))
	if _, err := testenv.RunTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 10000; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if got := out.String(); got != want.String() {
		t.Errorf("output: %d bytes, ending %q; want all %d bytes of seq 1 10000", len(got), got[max(0, len(got)-20):], want.Len())
	}
}

// heldIO releases the copy of a task's output when the harness waits for it (Wait) or
// cancels it (Cancel, once it has cancelled).
type heldIO struct {
	cio.IO
	release func()
}

func (h *heldIO) Wait() {
	h.release()
	h.IO.Wait()
}

func (h *heldIO) Cancel() {
	h.IO.Cancel()
	h.release()
}

// heldWriter blocks every write until held is closed.
type heldWriter struct {
	held chan struct{}
	buf  testenv.Buffer
}

func (w *heldWriter) Write(p []byte) (int, error) {
	<-w.held
	return w.buf.Write(p)
}

func (w *heldWriter) String() string { return w.buf.String() }
