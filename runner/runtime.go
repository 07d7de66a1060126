package runner

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/devices"
)

// Runtime is what the runner needs from a container runtime: small, primitive
// operations, each idempotent (stopping or removing what is already gone returns nil),
// so that the runner can treat any error as "retry with back-off". A Runtime makes no
// lifecycle decisions; it executes what the runner planned, reports what it sees (List,
// a read) and mends what a crash left behind when the runner asks (Repair).
type Runtime interface {
	// Type names the runtime: the scheme of the container IDs statuses report, as the
	// kubelet reports them (ContainerID).
	Type() string

	// EnsureImage makes req's image present according to its policy (pulling it when
	// needed, with its pull secrets' credentials first) and returns what is known of it.
	EnsureImage(ctx context.Context, req PullRequest) (Image, error)

	// PreparePod makes on the host what a pod's sandbox and containers need before
	// they are created: the pod's cgroup with its limits, its directory with its /etc
	// files, and its volumes (objs gives configMap, secret and projected volumes their
	// content). It is idempotent; a worker calls it before the sandbox or the first
	// container a sync creates, as the kubelet makes a pod's cgroup and mounts its
	// volumes before it asks its runtime for them, and so that the generated files
	// follow the host (its resolv.conf) as on a kubelet. It returns what it resolved of
	// the pod (PodConfig), which the sync hands to StartSandbox and CreateContainer.
	PreparePod(ctx context.Context, pod *corev1.Pod, objs manifests.Objects) (PodConfig, error)
	// StartSandbox creates and starts what holds a pod's namespaces, with the pod's
	// network if the runtime has one to give it; attempt counts the sandboxes the pod has
	// had (0 for the first); cfg is what PreparePod resolved of the pod. A failure leaves
	// nothing of the sandbox behind. The pod's status.startTime, when set, is recorded
	// with the sandbox, as with every container CreateContainer makes, and reported as
	// Container.PodStart. The sandbox fails when the pod's runtime handler is unknown,
	// as on the kubelet.
	StartSandbox(ctx context.Context, pod *corev1.Pod, cfg PodConfig, attempt int) (Container, error)
	// CreateContainer creates (but does not start) one container of a pod that
	// PreparePod prepared.
	CreateContainer(ctx context.Context, req CreateRequest) (Container, error)
	// StartContainer starts a created container.
	StartContainer(ctx context.Context, id string) error
	// BeginStop records that stopping a container began and must be over by deadline, so
	// that a staticpod restarted meanwhile finishes the stop in the time that is left
	// (reported as Container.StopDeadline) instead of starting it over.
	BeginStop(ctx context.Context, id string, deadline time.Time) error
	// StopContainer sends the container's stop signal, waits up to grace for it to exit,
	// then kills it. A grace of 0 kills at once. It applies to sandboxes too.
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	// RemoveContainer deletes a stopped or never-started container and what it owns in
	// the runtime. It fails, and leaves it, if the container runs: one seen created may
	// have been started since by a start its creator sent before it was killed.
	RemoveContainer(ctx context.Context, id string) error
	// SyncVolumes brings the content of the pod's configMap, secret and projected volumes
	// up to date with objs (the ConfigMaps and Secrets of the pod's source), each volume
	// swapped as a whole so that a reader never sees half an update. It does nothing for
	// a volume not yet made (PreparePod makes them). A volume whose object or key is
	// missing keeps its content, and the error says which.
	SyncVolumes(ctx context.Context, pod *corev1.Pod, objs manifests.Objects) error
	// RemovePodData deletes what the runtime keeps on disk for a pod that is gone
	// (emptyDir volumes, generated /etc files).
	RemovePodData(ctx context.Context, uid types.UID) error

	// Exec runs a command in a running container and returns its exit code.
	Exec(ctx context.Context, id string, req ExecRequest) (int, error)

	// Dial connects to address from inside the pod's network namespace: the one
	// sandbox holds, or the host's when sandbox is nil. Probes and hooks use it.
	Dial(ctx context.Context, sandbox *Container, network, address string) (net.Conn, error)

	// List returns every sandbox and container the runtime holds for staticpod, with
	// their state, in one call. The picture must be complete enough to rebuild all
	// state after a restart of staticpod. List only reads: what a crash or a lost
	// process left for Repair to mend reads unknown until it is mended.
	List(ctx context.Context) ([]Container, error)
	// Repair mends what the last List saw that needs it: it records exits and releases
	// what they leave, and ends what a crash, a killed process or a lost shim left
	// behind. Each repair that fails is logged and tried again by the next Repair. It
	// reports whether it changed what List reports, so that the caller lists again
	// before it acts. Only the one who owns the runtime's containers repairs; an
	// observer only lists.
	Repair(ctx context.Context) (changed bool)
}

// ContainerID is the ID a status reports for the container with the runtime ID id:
// <type>://<id>, as the kubelet reports it.
func ContainerID(runtimeType, id string) string { return runtimeType + "://" + id }

// ParseContainerID splits an ID that ContainerID made into the runtime's type and ID.
func ParseContainerID(s string) (runtimeType, id string, ok bool) {
	runtimeType, id, ok = strings.Cut(s, "://")
	return runtimeType, id, ok && runtimeType != "" && id != ""
}

// Errors a Runtime returns, to be tested with errors.Is.
var (
	ErrNotFound       = errors.New("not found")
	ErrImagePull      = errors.New("ErrImagePull")
	ErrImageNeverPull = errors.New("ErrImageNeverPull")
	ErrCreateConfig   = errors.New("CreateContainerConfigError")
	ErrUnavailable    = errors.New("runtime unavailable")
)

// Kind tells a pod's sandbox from its containers.
type Kind string

const (
	KindSandbox   Kind = "sandbox"
	KindContainer Kind = "container"
)

// State is the runtime state of a container.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// Image is an image present in the runtime.
type Image struct {
	Ref    string // the reference the pod asked for, normalized
	ID     string // image id (config digest)
	Digest string // manifest digest, the repo digest the kubelet reports as imageID
	Pulled bool   // EnsureImage went to the registry (a local image is not pulled)
	Size   int64  // bytes of the image's content, as the Pulled event tells
}

// PullRequest says which image to make present, and how.
type PullRequest struct {
	Image  string // as the pod spells it
	Policy corev1.PullPolicy
	// Secrets are the pod's image pull secrets found beside it, of the types that hold
	// registry credentials (manifests.PullSecretTypes), in the order the pod names them.
	// Their credentials are tried before the node's, as the kubelet's keyring orders
	// them. Their values must never reach a log, an event, an error or an API answer.
	Secrets []*corev1.Secret
	// Progress, unless nil, is told how far a pull is, from another goroutine: at its
	// start and then every half second until EnsureImage returns.
	Progress func(wire.PullProgress)
}

// PodConfig is what a runtime resolved of a pod once per sync (PreparePod) for its
// sandbox and every container the sync creates, as the kubelet resolves a pod's
// sandbox config once per sync and gives it to the creation of each container. The
// runner hands it back as it got it; its fields are the runtime's words.
type PodConfig struct {
	Dir    string // the pod's directory
	RunDir string // its files that last no longer than the machine's boot
	UserNS uint32 // the first host ID of its user namespace; 0 for the host's
	// Cgroup is the pod's cgroup, the parent of its containers', in the form of the
	// runtime's cgroup driver.
	Cgroup string
	// Handler is the runtime handler that runs the pod's containers, "" for the
	// default; RuntimeClass, the RuntimeClass that named it ("" when none did).
	Handler, RuntimeClass string
	Hostname              string    // its UTS namespace's
	SharesPID             bool      // its containers share a PID namespace of the pod's own
	SandboxHash           string    // manifests.SandboxHash
	Start                 Timestamp // its status.startTime, recorded with what is made of it
}

// CreateRequest says which container of which pod to create.
type CreateRequest struct {
	Pod       *corev1.Pod
	Config    PodConfig // what PreparePod resolved of Pod
	Container *corev1.Container
	Init      bool       // an init container (or sidecar)
	Attempt   int        // restart count: 0 for the first run
	Hash      string     // manifests.ContainerHash of Container
	Sandbox   *Container // the pod's running sandbox; nil for a pod without one
	Image     Image
	// ImageVolumes are the images of the pod's image volumes that Container mounts, by
	// volume name, made present (EnsureImage) with each volume's pull policy.
	ImageVolumes map[string]Image
	// Objects are the ConfigMaps and Secrets of the pod's source, which its volumes and
	// environment read. A reference to one that is missing fails with ErrCreateConfig.
	Objects manifests.Objects
	// Devices are what device plugins allocated to the container (runner/devices).
	Devices devices.Allocation
}

// Container is a sandbox or a container as the runtime reports it. Everything the
// runner needs to rebuild its state after a restart is here, read from the runtime.
type Container struct {
	ID           string
	Kind         Kind
	PodUID       types.UID
	PodName      string
	PodNamespace string
	Name         string // container name; the pod name for a sandbox
	Attempt      int
	Hash         string // manifests.ContainerHash; of a sandbox, manifests.SandboxHash ("" if made before it)
	Source       string // the manifest source that asked for it: file, http, api
	Location     string // the pod's file, URL or pushed name; "" when not recorded (see RunningPod)
	State        State
	PID          uint32
	ExitCode     int32
	Reason       string // for exited: Completed, Error, OOMKilled
	Message      string // for exited: the termination message
	Image        string
	ImageRef     string
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	LogPath      string

	// A sandbox's pod network: its pod IPs, first the one status.podIP reports; or,
	// without any, NetworkNote may say why (no pod network is configured), which the
	// pod's events tell.
	IPs         []string
	NetworkNote string

	// What stopping the container needs when its pod's spec is gone (an orphan found
	// after a restart), recorded when it was created, as the kubelet records them.
	PodGrace     *time.Duration    // the pod's terminationGracePeriodSeconds
	PreStop      *corev1.Container // its name, ports and lifecycle.preStop; nil without a hook
	StopDeadline time.Time         // set once a stop began: when the grace period ends

	// PodStart is the pod's status.startTime as given when this was made (see
	// StartSandbox); empty when none was given. A restarted staticpod counts the pod's
	// active deadline from it. It stays text as recorded, read only when a worker
	// settles its pod's start, not at every List.
	PodStart Timestamp
}

// Timestamp is a time as a runtime records it: RFC 3339 text with nanoseconds, in UTC,
// or "" for none. Carrying the text lets a List report it without parsing it.
type Timestamp string

// TimestampOf is t as a Timestamp; "" for the zero time.
func TimestampOf(t time.Time) Timestamp {
	if t.IsZero() {
		return ""
	}
	return Timestamp(t.UTC().Format(time.RFC3339Nano))
}

// Time is the time ts records: zero when it records none, or something that does not
// read as one.
func (ts Timestamp) Time() time.Time {
	if ts == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return time.Time{}
	}
	return t
}

// ExecRequest is a command to run in a container.
type ExecRequest struct {
	Command []string
	Stdin   io.Reader // its end closes the command's input (without TTY)
	Stdout  io.Writer
	Stderr  io.Writer // unused with TTY: the terminal carries both streams
	TTY     bool
	Size    *TermSize       // the terminal's size at start, with TTY
	Resize  <-chan TermSize // the terminal's later sizes, with TTY
}

// TermSize is a terminal's size in characters.
type TermSize = wire.TermSize

// NeedsSandbox reports whether a pod needs a sandbox process: to hold a network
// namespace (any pod not on the host network) or a shared PID namespace.
func NeedsSandbox(pod *corev1.Pod) bool {
	return !pod.Spec.HostNetwork || manifests.SharesPIDNamespace(pod)
}
