package containerdrt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/handlers"
	"github.com/staticpod/staticpod/containerdrt/images"
	"github.com/staticpod/staticpod/containerdrt/poddir"
	"github.com/staticpod/staticpod/containerdrt/podnet"
	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/containerdrt/userns"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// Defaults of a Runtime's configuration.
const (
	DefaultNamespace   = "staticpod"
	DefaultCallTimeout = 2 * time.Minute
	podsDir            = "pods"    // under the root dir: one directory per pod UID
	sandboxDir         = "sandbox" // under the root dir: the sandbox's read-only root
	userFilesDir       = "images"  // under the run dir: the images' user files, one directory per manifest digest
)

// Config configures a Runtime.
type Config struct {
	Address   string // containerd's socket: a path, or unix:///path (see shims.SocketPath)
	Namespace string // the containerd namespace staticpod owns
	RootDir   string // pods/<uid> (volumes, image volumes, user namespaces), the sandbox root
	// RunDir holds what lasts no longer than the machine's boot: pods/<uid> (the pod's
	// /etc files, /dev/shm and termination logs), the pinned namespaces
	// (namespaces/<sandbox>) and the images' /etc/passwd and /etc/group
	// (images/<manifest digest>, see images.Store.UserFiles). On a tmpfs (/run) these
	// cost a fraction of what files on a disk do, many pods at once. "" = RootDir/run.
	RunDir     string
	PodLogDir  string        // CRI log files: <dir>/<namespace>_<name>_<uid>/<container>/<attempt>.log
	Self       string        // run as log writer and sandbox: staticpod-helper (see internal/helper) or staticpod; "" = this binary
	Log        LogConfig     // rotation of container logs and their /var/log/containers links
	Images     images.Config // pulls and imports
	SeccompDir string        // Localhost seccomp profiles
	// CNI configures pod networks; without a ConfDir, pods not on the host's network
	// have loopback only.
	CNI     podnet.Config
	Cgroups cgroups.Config
	// RuntimeHandlers are --runtime-handler's NAME=VALUE (see handlers.Parse), beside
	// containerd's CRI runtimes.
	RuntimeHandlers []string
	FIFODir         string // where exec's FIFOs are made; "" = containerd's default
	// Observe makes a Runtime that only watches a namespace a daemon owns (tests,
	// tools): Repair does nothing (an observer never calls it: two repairers of one
	// namespace would race), List reads the records anew every time (it knows of no
	// writes), and New settles no cgroup driver. An observer sees what the owner has
	// recorded or will: see List.
	Observe     bool
	HostIP      string        // the node's IP; "" = the first global unicast address
	CallTimeout time.Duration // bound of every containerd call; 0 = DefaultCallTimeout
	CDISpecDirs []string      // directories of CDI specs, by rising priority; nil = DefaultCDISpecDirs
	Logger      *slog.Logger
}

// Runtime implements runner.Runtime on containerd.
type Runtime struct {
	client *client.Client
	cfg    Config
	images *images.Store
	cgroup cgroups.Pods // where pods and containers are placed
	net    *podnet.Network
	log    *slog.Logger

	handlers handlers.Set // the runtime handlers pods may name, set by New
	// defaultRuntime is containerd's runtime for the namespace, read by New; "" when
	// it could not be, and the client asks at each use.
	defaultRuntime string

	rootMu        sync.Mutex // guards rootInstalled
	rootInstalled bool       // the sandbox root holds this binary (see sandboxRoot)

	// pinMu orders the making and removing of pinned sandboxes with the repairer's
	// look at them, so that a sandbox being made is never taken for one whose pins are
	// lost. It guards repairs.pinsSeen. Sandboxes are made one at a time under it,
	// which a burst of pods is better for: each pin is a mount, and runc copies every
	// mount of the host into each container's new mount namespace, so making all
	// sandboxes first makes every container after them dearer (measured: 100 pods at
	// once started 15 % later and cost runc 30 % more when sandboxes were made
	// concurrently).
	pinMu sync.Mutex

	records *records // the container records of the last List

	users *userns.Allocator // the user namespaces of pods with hostUsers: false

	repairs *repairer // mends what List saw (Repair)

	forged forgedUIDs // containers whose UID label List ignores, warned about once

	cdi *cdi.Cache // the CDI specs of cfg.CDISpecDirs, read anew for each container that asks for a device (readCDISpecs)

	started time.Time // when New ran: leases older than this are not this Runtime's
}

var _ runner.Runtime = (*Runtime)(nil)

// New connects to containerd. It fails when containerd does not answer. It writes
// nothing: what the root dir must hold is made when first needed, so that a Runtime
// made to exec or to look has no effect on disk.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	recs := newRecords(cfg.Namespace)
	c, err := client.New(cfg.Address, client.WithDefaultNamespace(cfg.Namespace), client.WithTimeout(10*time.Second),
		client.WithExtraDialOpts([]grpc.DialOption{grpc.WithChainUnaryInterceptor(recs.count)}))
	if err != nil {
		return nil, fmt.Errorf("connect to containerd at %s: %w", cfg.Address, err)
	}
	snapshotter, defaultRuntime := namespaceDefaults(ctx, c, cfg.Namespace)
	cfg.Images.Snapshotter = cmp.Or(cfg.Images.Snapshotter, snapshotter)
	imgs, err := images.New(c, cfg.Images, cfg.Logger)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	r := &Runtime{client: c, cfg: cfg, log: cfg.Logger, defaultRuntime: defaultRuntime, net: podnet.New(cfg.CNI, cfg.Logger), images: imgs, records: recs, started: time.Now(),
		users: userns.New(filepath.Join(cfg.RootDir, podsDir)), cdi: newCDIRegistry(cfg.CDISpecDirs)}
	r.repairs = newRepairer(r)
	// An observer's: it makes none, and takes the layout New gives even where it
	// refuses the root (a namespace named like a slice).
	r.cgroup, _ = cgroups.New(cgroups.Config{Driver: cgroups.Cgroupfs, Root: "/" + cfg.Namespace})
	ctx, cancel := r.call(ctx)
	defer cancel()
	if _, err := c.Version(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("containerd at %s: %w: %w", cfg.Address, runner.ErrUnavailable, err)
	}
	if !cfg.Observe {
		if err := r.settleCgroups(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := r.settleHandlers(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if !cfg.Observe && cfg.CNI.ConfDir != "" {
		r.net.Read() // says in the log, once at start, how pods will be networked
	}
	return r, nil
}

func (cfg *Config) complete() error {
	address, err := shims.SocketPath(cfg.Address)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cfg.Address = address
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the staticpod binary: %w", err)
		}
		cfg.Self = self
	}
	if cfg.HostIP == "" {
		cfg.HostIP = primaryIP()
	}
	if cfg.CDISpecDirs == nil {
		cfg.CDISpecDirs = DefaultCDISpecDirs
	}
	if cfg.Images.RootDir == "" {
		cfg.Images.RootDir = cfg.RootDir
	}
	if cfg.RootDir == "" || cfg.PodLogDir == "" {
		return fmt.Errorf("containerd runtime: root dir and pod log dir are required")
	}
	if cfg.RunDir == "" {
		cfg.RunDir = filepath.Join(cfg.RootDir, "run")
	}
	if cfg.Images.UserFilesDir == "" {
		cfg.Images.UserFilesDir = filepath.Join(cfg.RunDir, userFilesDir)
	}
	return nil
}

// settleCgroups settles the cgroup driver and root (cgroups.Detect). A driver that
// does not fit the host is a configuration error.
func (r *Runtime) settleCgroups(ctx context.Context) error {
	conn, ok := r.client.Conn().(grpc.ClientConnInterface)
	if !ok {
		return fmt.Errorf("containerd at %s: no gRPC connection to ask for its cgroup driver", r.cfg.Address)
	}
	driver, err := cgroups.Detect(ctx, conn, r.cfg.Cgroups.Driver)
	if errors.Is(err, cgroups.ErrDriverMismatch) {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err != nil {
		return err
	}
	root := r.cfg.Cgroups.Root
	if root == "" && driver == cgroups.Cgroupfs {
		// One tree per containerd namespace: /staticpod by default, and tests in
		// namespaces of their own never share a cgroup.
		root = "/" + r.cfg.Namespace
	}
	r.cgroup, err = cgroups.New(cgroups.Config{Driver: driver, Root: root, PodMaxPIDs: r.cfg.Cgroups.PodMaxPIDs})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// Cgroups is the cgroup driver the runtime uses and the root of its pod cgroups.
func (r *Runtime) Cgroups() (cgroups.Driver, string) { return r.cgroup.Driver(), r.cgroup.Root() }

// HostIP is the node IP the runtime reports.
func (r *Runtime) HostIP() string { return r.cfg.HostIP }

// Close releases the connection to containerd. Containers keep running.
func (r *Runtime) Close() error {
	r.repairs.wait()
	r.images.Wait()
	return r.client.Close()
}

// Healthy reports whether containerd answers.
func (r *Runtime) Healthy(ctx context.Context) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	_, err := r.client.Version(ctx)
	return convertErr(err)
}

// Type names the runtime in the container IDs of statuses: containerd://<id>.
func (r *Runtime) Type() string { return "containerd" }

// Images runs the import of --image-dir until ctx is done, telling arrived (if not nil)
// of the images each archive brought; Imported is closed once the archives present at
// start are in.
func (r *Runtime) Images() interface {
	Run(ctx context.Context, arrived func(provides func(image string) bool)) error
	Imported() <-chan struct{}
} {
	return r.images
}

// EnsureImage makes req's image present per its policy, with its pull secrets. A pull
// is bounded by ctx alone, not by the call timeout: a large image on a slow link may
// take long.
func (r *Runtime) EnsureImage(ctx context.Context, req runner.PullRequest) (runner.Image, error) {
	return r.images.Ensure(namespaces.WithNamespace(ctx, r.cfg.Namespace), req)
}

// settleHandlers makes the runtime handlers pods may name: containerd's CRI runtimes,
// unless containerd serves no CRI (or the runtime only observes), and
// --runtime-handler's, which win. A flag that does not parse is a configuration error.
func (r *Runtime) settleHandlers(ctx context.Context) error {
	var fromContainerd handlers.Set
	if conn, ok := r.client.Conn().(grpc.ClientConnInterface); ok && !r.cfg.Observe {
		config, err := cgroups.CRIConfig(ctx, conn)
		if err == nil {
			fromContainerd, err = handlers.FromCRI(config)
		}
		if err != nil {
			r.log.Warn("containerd's CRI runtimes are not runtime handlers of staticpod", "err", err)
		}
	}
	set, err := handlers.New(fromContainerd, r.cfg.RuntimeHandlers)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	set.Probe(ctx)
	r.handlers = set
	if len(set) > 1 {
		var names []string
		for _, name := range set.Names() {
			h := set[name]
			note := h.Source
			if h.OCIVersion != "" {
				note += ", OCI spec " + h.OCIVersion
			}
			names = append(names, name+" ("+note+")")
		}
		r.log.Info("runtime handlers", "handlers", strings.Join(names, ", "))
	}
	return nil
}

// call returns ctx with staticpod's namespace and the call timeout.
func (r *Runtime) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(namespaces.WithNamespace(ctx, r.cfg.Namespace), r.cfg.CallTimeout)
}

// podDir is the directory of the pod with the UID uid, <root>/pods/<uid>. A UID that is
// not a plain token (manifests.CheckUID) is refused: it could name any directory.
func (r *Runtime) podDir(uid types.UID) (string, error) {
	if err := manifests.CheckUID(uid); err != nil {
		return "", fmt.Errorf("pod directory: %w", err)
	}
	return filepath.Join(r.cfg.RootDir, podsDir, string(uid)), nil
}

// runDirOf is the directory of the files that last no longer than the machine's boot
// (see Config.RunDir) of the pod whose directory (podDir) is podDir. A pod prepared by
// a staticpod that kept them in the pod's directory (its /etc/hostname is there) keeps
// them there: its containers share one /etc/hosts and one /dev/shm.
func (r *Runtime) runDirOf(podDir string) string {
	if _, err := os.Lstat(filepath.Join(podDir, poddir.HostnameFile)); err == nil {
		return podDir
	}
	return filepath.Join(r.cfg.RunDir, podsDir, filepath.Base(podDir))
}

// podDirAndUserNS are pod's directory (podDir) and the first host ID of its user
// namespace, allocated on first use and kept in that directory; 0 for a pod in the
// host's user namespace.
func (r *Runtime) podDirAndUserNS(pod *corev1.Pod) (string, uint32, error) {
	dir, err := r.podDir(pod.UID)
	if err != nil || pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return dir, 0, err
	}
	m, err := r.users.Get(string(pod.UID))
	if err != nil {
		return "", 0, err
	}
	return dir, m.HostID, nil
}

// primaryIP is the first global unicast IPv4 address of the host (IPv6 if there is no
// IPv4), or "" when there is none; it is what status.hostIP reports.
func primaryIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	var v6 string
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok || !ipnet.IP.IsGlobalUnicast() {
			continue
		}
		if ipnet.IP.To4() != nil {
			return ipnet.IP.String()
		}
		if v6 == "" {
			v6 = ipnet.IP.String()
		}
	}
	return v6
}

// namespaceDefaults are the snapshotter and the runtime containerd uses for namespace
// ns when none is named: the namespace's labels, else containerd's defaults; "" when
// containerd cannot tell now. Read once, they spare every image check, container
// creation and sandbox record a read of the namespace's labels.
func namespaceDefaults(ctx context.Context, c *client.Client, ns string) (snapshotter, runtime string) {
	labels, err := c.NamespaceService().Labels(ctx, ns)
	switch {
	case errdefs.IsNotFound(err):
		return defaults.DefaultSnapshotter, defaults.DefaultRuntime // a namespace not made yet has no labels
	case err != nil:
		return "", "" // asked again at each use, as the client does
	}
	return cmp.Or(labels[defaults.DefaultSnapshotterNSLabel], defaults.DefaultSnapshotter),
		cmp.Or(labels[defaults.DefaultRuntimeNSLabel], defaults.DefaultRuntime)
}
