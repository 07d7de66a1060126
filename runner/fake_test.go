package runner

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/manifests"
)

// fakeRuntime is the one hand-written Runtime for the loop's unit tests: containers
// live in a map, run until the test makes them exit, and operations can be made to
// block (gate) or fail (fail) to stage races.
type fakeRuntime struct {
	now func() time.Time

	mu          sync.Mutex // guards everything below
	containers  map[string]*Container
	removedPod  map[types.UID]bool
	calls       []string
	gate        map[string]chan struct{} // operation -> closed when it may proceed
	fail        map[string]error         // operation -> error to return
	panicOn     string
	execCode    map[string]int           // container ID -> exit code of every exec in it
	execsKilled int                      // execs held at the gate until their ctx ended
	execs       []string                 // "ID: command" of every exec, in order
	graces      map[string]time.Duration // container ID -> grace of its last StopContainer
	// networkNote is the NetworkNote of the sandboxes it makes.
	networkNote string
	// volumes are the ConfigMaps and Secrets each pod's volumes were last synced with,
	// by SyncVolumes or CreateContainer.
	volumes map[types.UID]manifests.Objects
	// pulls are the requests of every EnsureImage, in order; pullFail fails those of
	// an image.
	pulls    []PullRequest
	pullFail map[string]error
	// pulledSize, when set, makes every EnsureImage a pull of an image of that size.
	pulledSize int64
	// pullProgress, when set, is told to each EnsureImage's Progress in turn, and
	// whilePulling called after each.
	pullProgress []wire.PullProgress
	whilePulling func()
	// creates are the requests of every CreateContainer, in order; sandboxConfigs, the
	// PodConfig of every StartSandbox. PreparePod resolves a pod to
	// PodConfig{Dir: "prepared/<uid>", Hostname: <its name>}.
	creates        []CreateRequest
	sandboxConfigs []PodConfig
	// repair is what Repair does; it reports whether it changed a container.
	repair func() bool
}

func newFakeRuntime(now func() time.Time) *fakeRuntime {
	return &fakeRuntime{now: now, containers: map[string]*Container{}, removedPod: map[types.UID]bool{}, gate: map[string]chan struct{}{}, fail: map[string]error{}, execCode: map[string]int{}, graces: map[string]time.Duration{}, volumes: map[types.UID]manifests.Objects{}}
}

// enter records a call, waits at its gate if one is set, and returns the failure set
// for it.
func (f *fakeRuntime) enter(op string) error {
	f.mu.Lock()
	f.calls = append(f.calls, op)
	g := f.gate[op]
	err := f.fail[op]
	p := f.panicOn == op
	f.mu.Unlock()
	if p {
		panic("fake " + op + " panicked")
	}
	if g != nil {
		<-g
	}
	return err
}

func (f *fakeRuntime) Type() string { return "fake" }

func (f *fakeRuntime) EnsureImage(_ context.Context, req PullRequest) (Image, error) {
	f.mu.Lock()
	f.pulls = append(f.pulls, req)
	f.mu.Unlock()
	if err := f.enter("EnsureImage"); err != nil {
		return Image{}, err
	}
	for _, p := range f.pullProgress {
		if req.Progress != nil {
			req.Progress(p)
			if f.whilePulling != nil {
				f.whilePulling()
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.pullFail[req.Image]; err != nil {
		return Image{}, err
	}
	return Image{Ref: req.Image, ID: "sha256:img", Digest: "sha256:digest", Pulled: f.pulledSize > 0, Size: f.pulledSize}, nil
}

func (f *fakeRuntime) StartSandbox(_ context.Context, pod *corev1.Pod, cfg PodConfig, attempt int) (Container, error) {
	if err := f.enter("StartSandbox"); err != nil {
		return Container{}, err
	}
	f.mu.Lock()
	f.sandboxConfigs = append(f.sandboxConfigs, cfg)
	f.mu.Unlock()
	c := Container{ID: fmt.Sprintf("%s-sandbox-%d", pod.UID, attempt), Kind: KindSandbox, PodUID: pod.UID, PodName: pod.Name,
		PodNamespace: pod.Namespace, Name: pod.Name, Attempt: attempt, State: StateRunning, PID: 100, CreatedAt: f.now(), StartedAt: f.now(),
		Source: manifests.SourceOf(pod), Location: manifests.LocationOf(pod), PodStart: TimestampOf(podStartOf(pod))}
	f.mu.Lock()
	c.NetworkNote = f.networkNote
	f.mu.Unlock()
	f.put(c)
	return c, nil
}

func (f *fakeRuntime) CreateContainer(_ context.Context, req CreateRequest) (Container, error) {
	if err := f.enter("CreateContainer"); err != nil {
		return Container{}, err
	}
	c := Container{ID: fmt.Sprintf("%s-%s-%d", req.Pod.UID, req.Container.Name, req.Attempt), Kind: KindContainer, PodUID: req.Pod.UID,
		PodName: req.Pod.Name, PodNamespace: req.Pod.Namespace, Name: req.Container.Name, Attempt: req.Attempt, Hash: req.Hash,
		State: StateCreated, CreatedAt: f.now(), Source: manifests.SourceOf(req.Pod), Location: manifests.LocationOf(req.Pod), PodStart: TimestampOf(podStartOf(req.Pod))}
	f.put(c)
	f.mu.Lock()
	f.volumes[req.Pod.UID] = req.Objects
	f.creates = append(f.creates, req)
	f.mu.Unlock()
	return c, nil
}

func (f *fakeRuntime) StartContainer(_ context.Context, id string) error {
	if err := f.enter("StartContainer"); err != nil {
		return err
	}
	return f.change(id, func(c *Container) { c.State, c.PID, c.StartedAt = StateRunning, 200, f.now() })
}

func (f *fakeRuntime) BeginStop(_ context.Context, id string, deadline time.Time) error {
	if err := f.enter("BeginStop"); err != nil {
		return err
	}
	f.change(id, func(c *Container) {
		if c.StopDeadline.IsZero() {
			c.StopDeadline = deadline
		}
	})
	return nil // idempotent: what is gone needs no stop
}

func (f *fakeRuntime) StopContainer(_ context.Context, id string, grace time.Duration) error {
	if err := f.enter("StopContainer"); err != nil {
		return err
	}
	f.mu.Lock()
	f.graces[id] = grace
	f.mu.Unlock()
	err := f.change(id, func(c *Container) {
		if c.State != StateExited {
			c.State, c.ExitCode, c.Reason, c.FinishedAt, c.PID = StateExited, 137, "Error", f.now(), 0
		}
	})
	if err != nil {
		return nil // idempotent: stopping what is gone succeeds
	}
	return nil
}

func (f *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	if err := f.enter("RemoveContainer"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.containers[id]; ok && c.State == StateRunning {
		return fmt.Errorf("remove %s: its process runs", id) // as containerd's Runtime refuses
	}
	delete(f.containers, id)
	return nil
}

func (f *fakeRuntime) PreparePod(_ context.Context, pod *corev1.Pod, _ manifests.Objects) (PodConfig, error) {
	if err := f.enter("PreparePod"); err != nil {
		return PodConfig{}, err
	}
	return PodConfig{Dir: "prepared/" + string(pod.UID), Hostname: pod.Name}, nil
}

func (f *fakeRuntime) SyncVolumes(_ context.Context, pod *corev1.Pod, objs manifests.Objects) error {
	if err := f.enter("SyncVolumes"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.volumes[pod.UID] = objs
	return nil
}

func (f *fakeRuntime) RemovePodData(_ context.Context, uid types.UID) error {
	if err := f.enter("RemovePodData"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removedPod[uid] = true
	return nil
}

func (f *fakeRuntime) Exec(ctx context.Context, id string, req ExecRequest) (int, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "Exec")
	g, err, code := f.gate["Exec"], f.fail["Exec"], f.execCode[id]
	f.execs = append(f.execs, id+": "+strings.Join(req.Command, " "))
	f.mu.Unlock()
	if g != nil { // as in containerd, a command still running when ctx ends is killed
		select {
		case <-g:
		case <-ctx.Done():
			f.mu.Lock()
			f.execsKilled++
			f.mu.Unlock()
			return -1, ctx.Err()
		}
	}
	if err != nil {
		return -1, err
	}
	return code, nil
}

func (f *fakeRuntime) Dial(ctx context.Context, _ *Container, network, address string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

func (f *fakeRuntime) List(context.Context) ([]Container, error) {
	if err := f.enter("List"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Container, 0, len(f.containers))
	for _, c := range f.containers {
		out = append(out, *c)
	}
	return out, nil
}

// Repair records the call and runs repair, if the test set one, while it holds no
// lock: the repair may change containers.
func (f *fakeRuntime) Repair(context.Context) bool {
	f.enter("Repair")
	f.mu.Lock()
	repair := f.repair
	f.mu.Unlock()
	return repair != nil && repair()
}

// podStartOf is the pod's status.startTime, which a Runtime records with what it makes.
func podStartOf(pod *corev1.Pod) time.Time {
	if pod.Status.StartTime == nil {
		return time.Time{}
	}
	return pod.Status.StartTime.Time
}

func (f *fakeRuntime) put(c Container) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[c.ID] = &c
}

func (f *fakeRuntime) change(id string, fn func(*Container)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	fn(c)
	return nil
}

// exit makes a running container exit with code.
func (f *fakeRuntime) exit(id string, code int32) {
	_ = f.change(id, func(c *Container) {
		c.State, c.ExitCode, c.FinishedAt, c.PID = StateExited, code, f.now(), 0
		c.Reason = "Completed"
		if code != 0 {
			c.Reason = "Error"
		}
	})
}

// count returns how many calls of op were made.
func (f *fakeRuntime) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == op {
			n++
		}
	}
	return n
}

// byName returns the containers of a pod by "name/attempt".
func (f *fakeRuntime) byName(uid types.UID) map[string]Container {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]Container{}
	for _, c := range f.containers {
		if c.PodUID == uid {
			out[fmt.Sprintf("%s/%d", c.Name, c.Attempt)] = *c
		}
	}
	return out
}

// callsOf returns every call made, in order.
func (f *fakeRuntime) callsOf() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}
