package bench

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sync/errgroup"

	"github.com/staticpod/staticpod/internal/testenv"
)

// Floor starts containers as fast as containerd can, with nothing staticpod adds (no
// image check, no log writer, no status, no sandbox): what any runner on containerd
// pays at least. Each container runs `sleep 3600` in a network namespace of its own, or
// in the host's.
type Floor struct {
	d      *testenv.Daemon
	ns     string
	events *Events
	meter  *CPUMeter
}

// NewFloor imports the image into namespace ns of d.
func NewFloor(ctx context.Context, d *testenv.Daemon, ns string, events *Events, meter *CPUMeter) (*Floor, error) {
	if _, err := testenv.ImportImage(ctx, d.Client, ns, testenv.ImageOptions{Ref: Image}); err != nil {
		return nil, err
	}
	return &Floor{d: d, ns: ns, events: events, meter: meter}, nil
}

// Start creates and starts count containers through the client, all at once when
// concurrent, else one after the other, and returns the time from the first call to
// containerd's event of the last task's start, and the CPU time that cost up to a
// second after it (see settle). The containers are removed after.
func (f *Floor) Start(ctx context.Context, count int, hostNet, concurrent bool) (time.Duration, CPUUse, error) {
	ctx = namespaces.WithNamespace(ctx, f.ns)
	defer f.remove(ctx)
	img, err := f.d.Client.GetImage(ctx, Image)
	if err != nil {
		return 0, CPUUse{}, err
	}
	opts := []oci.SpecOpts{oci.WithImageConfig(img), oci.WithProcessArgs("sleep", "3600")}
	if hostNet {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace))
	}
	one := func(i int) error {
		id := fmt.Sprintf("floor-%d", i)
		cont, err := f.d.Client.NewContainer(ctx, id, client.WithImage(img), client.WithNewSnapshot(id, img), client.WithNewSpec(opts...))
		if err != nil {
			return err
		}
		task, err := cont.NewTask(ctx, cio.NullIO)
		if err != nil {
			return err
		}
		return task.Start(ctx)
	}
	return f.measured(count, func() error {
		var g errgroup.Group
		for i := range count {
			if concurrent {
				g.Go(func() error { return one(i) })
			} else if err := one(i); err != nil {
				return err
			}
		}
		return g.Wait()
	})
}

// measured runs start, which starts count containers in the floor's namespace, and
// returns the time from its call to containerd's event of the last task's start, and
// the CPU time that cost up to settle after it.
func (f *Floor) measured(count int, start func() error) (time.Duration, CPUUse, error) {
	cpu, err := f.meter.Mark(f.d.PID())
	if err != nil {
		return 0, CPUUse{}, err
	}
	mark := f.events.Mark()
	begun := time.Now()
	if err := start(); err != nil {
		return 0, CPUUse{}, err
	}
	started, err := f.events.Await(mark, count, time.Minute, In(f.ns, "/tasks/start"))
	if err != nil {
		return 0, CPUUse{}, err
	}
	time.Sleep(settle)
	use, err := f.meter.Since(cpu, f.d.PID())
	return Last(started).Sub(begun), use, err
}

// StartCtr starts one container with `ctr run -d` and returns the time from the
// command's start to containerd's event of the task's start.
func (f *Floor) StartCtr(ctx context.Context, hostNet bool) (time.Duration, error) {
	defer f.remove(namespaces.WithNamespace(ctx, f.ns))
	args := []string{"-a", f.d.Address, "-n", f.ns, "run", "-d", "--fifo-dir", f.d.FIFODir()}
	if hostNet {
		args = append(args, "--net-host")
	}
	args = append(args, Image, "floor-ctr", "sleep", "3600")
	mark := f.events.Mark()
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("ctr %v: %v\n%s", args, err, out)
	}
	started, err := f.events.Await(mark, 1, time.Minute, In(f.ns, "/tasks/start"))
	if err != nil {
		return 0, err
	}
	return Last(started).Sub(start), nil
}

// StartIdle starts count containers through the client, each `sleep 3600` in a
// network namespace of its own, and returns the time of the last one's start event.
// They run until Remove.
func (f *Floor) StartIdle(ctx context.Context, count int) (time.Time, error) {
	ctx = namespaces.WithNamespace(ctx, f.ns)
	img, err := f.d.Client.GetImage(ctx, Image)
	if err != nil {
		return time.Time{}, err
	}
	mark := f.events.Mark()
	for i := range count {
		id := fmt.Sprintf("floor-%d", i)
		cont, err := f.d.Client.NewContainer(ctx, id, client.WithImage(img), client.WithNewSnapshot(id, img),
			client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs("sleep", "3600")))
		if err != nil {
			return time.Time{}, err
		}
		task, err := cont.NewTask(ctx, cio.NullIO)
		if err != nil {
			return time.Time{}, err
		}
		if err := task.Start(ctx); err != nil {
			return time.Time{}, err
		}
	}
	started, err := f.events.Await(mark, count, time.Minute, In(f.ns, "/tasks/start"))
	if err != nil {
		return time.Time{}, err
	}
	return Last(started), nil
}

// Remove deletes every container of the floor's namespace.
func (f *Floor) Remove(ctx context.Context) { f.remove(namespaces.WithNamespace(ctx, f.ns)) }

// remove deletes every container of the floor's namespace, its task and snapshot.
func (f *Floor) remove(ctx context.Context) {
	cs, _ := f.d.Client.Containers(ctx)
	var g errgroup.Group
	g.SetLimit(8)
	for _, c := range cs {
		g.Go(func() error {
			if task, err := c.Task(ctx, nil); err == nil {
				task.Delete(ctx, client.WithProcessKill)
			}
			return c.Delete(ctx, client.WithSnapshotCleanup)
		})
	}
	g.Wait()
}

// StartAndStop starts one container of the Stopper script, then stops it as a runner
// would: SIGTERM, the exit, the task's and the container's deletion. It returns the
// time from the kill to containerd's event of the container's deletion.
func (f *Floor) StartAndStop(ctx context.Context, hostNet bool) (time.Duration, error) {
	ctx = namespaces.WithNamespace(ctx, f.ns)
	defer f.remove(ctx)
	img, err := f.d.Client.GetImage(ctx, Image)
	if err != nil {
		return 0, err
	}
	opts := []oci.SpecOpts{oci.WithImageConfig(img), oci.WithProcessArgs("sh", "-c", Stopper)}
	if hostNet {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace))
	}
	cont, err := f.d.Client.NewContainer(ctx, "floor-stop", client.WithImage(img), client.WithNewSnapshot("floor-stop", img), client.WithNewSpec(opts...))
	if err != nil {
		return 0, err
	}
	task, err := cont.NewTask(ctx, cio.NullIO)
	if err != nil {
		return 0, err
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		return 0, err
	}
	if err := task.Start(ctx); err != nil {
		return 0, err
	}
	time.Sleep(300 * time.Millisecond) // the shell sets its trap
	mark := f.events.Mark()
	start := time.Now()
	if err := task.Kill(ctx, syscall.SIGTERM); err != nil {
		return 0, err
	}
	<-exited
	if _, err := task.Delete(ctx); err != nil {
		return 0, err
	}
	if err := cont.Delete(ctx, client.WithSnapshotCleanup); err != nil {
		return 0, err
	}
	deleted, err := f.events.Await(mark, 1, time.Minute, In(f.ns, "/containers/delete"))
	if err != nil {
		return 0, err
	}
	return Last(deleted).Sub(start), nil
}
