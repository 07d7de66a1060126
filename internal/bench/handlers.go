package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
)

// handlers measures a pod's start under crun against runc, as the 1-manifest row of
// starts does (manifest written → the container's start event, host network), on a
// node of its own that has crun as a runtime handler (--runtime-handler, by way of
// testenv.CrunHandler). The two alternate, so that both see the same machine.
func (r *Run) handlers(ctx context.Context) error {
	dir := filepath.Join(r.opts.Dir, "handlers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	handler, err := testenv.CrunHandler(dir)
	if err != nil {
		return err
	}
	n, err := r.node(ctx, "crun", "--runtime-handler", handler)
	if err != nil {
		return err
	}
	if err := n.Start(); err != nil {
		return err
	}
	defer n.Stop()
	samples := map[string][]float64{}
	for rep := range r.repeats(7) {
		for _, h := range []string{"runc", "crun"} {
			name := fmt.Sprintf("%s%d", h, rep)
			pod := strings.Replace(Pod(name, Stopper, true), "  containers:", "  runtimeClassName: "+h+"\n  containers:", 1)
			mark := r.events.Mark()
			start := time.Now()
			if err := n.Write(name+".yaml", pod); err != nil {
				return err
			}
			started, err := r.events.Await(mark, 1, 3*time.Minute, In(n.Name, "/tasks/start"))
			if err != nil {
				return fmt.Errorf("%s: %w (staticpod's log:\n%s)", h, err, n.LogTail())
			}
			samples[h] = append(samples[h], ms(Last(started).Sub(start)))
			if err := n.Clear(ctx); err != nil {
				return err
			}
		}
	}
	row := NewRow("start/net=host/pods=1/handler=crun", "1 manifest written → running under crun (runtimeClassName), host network", "ms", samples["crun"]).
		Against("the same under runc", samples["runc"])
	r.Report.Add(row.Noted("crun/runc %.2f×", row.Ratio))
	return nil
}
