package devices

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	// DefaultDir is the kubelet's device plugin directory: plugins find kubelet.sock
	// there and put their own sockets beside it.
	DefaultDir = "/var/lib/kubelet/device-plugins"
	// socketName is the Registration API's socket in the directory.
	socketName = "kubelet.sock"
)

// Config says where the manager serves and keeps its checkpoint.
type Config struct {
	Dir        string // the device plugin directory (DefaultDir)
	Checkpoint string // the file that keeps the assignments, under staticpod's root dir
	Log        *slog.Logger
}

// Manager serves the plugins' registrations and assigns their devices. A nil Manager
// serves nothing, admits every pod and allocates nothing.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	changed chan struct{} // one slot: devices were registered, came back or went
	serving chan struct{} // closed once kubelet.sock listens

	mu        sync.Mutex // guards resources, assigned and runCtx
	resources map[string]*resource
	assigned  map[types.UID]map[string]map[string]*Assignment // pod -> container -> resource
	runCtx    context.Context                                 // Run's: the endpoints live in it; nil before Run
	endpoints sync.WaitGroup                                  // the endpoints' goroutines
}

// resource is one plugin's resource: its endpoint while registered and its devices.
type resource struct {
	ep      *endpoint       // the plugin registered last for it
	devices map[string]bool // device ID -> healthy, as its last ListAndWatch said
}

// New returns a manager with the assignments of the checkpoint; Run serves it. It
// returns nil, a manager of no devices, when cfg names no directory.
func New(cfg Config) (*Manager, error) {
	if cfg.Dir == "" {
		return nil, nil
	}
	as, err := readCheckpoint(cfg.Checkpoint)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg: cfg, log: cfg.Log, changed: make(chan struct{}, 1), serving: make(chan struct{}),
		resources: map[string]*resource{}, assigned: map[types.UID]map[string]map[string]*Assignment{},
	}
	for i := range as {
		m.put(&as[i])
	}
	return m, nil
}

// maxSocketPath is the longest path a unix socket may have on Linux (sun_path's 108
// bytes, less the terminating NUL).
const maxSocketPath = 107

// Run serves the Registration API on kubelet.sock in the directory until ctx is done,
// then closes every plugin's connection. A kubelet.sock left by an earlier run is
// replaced: plugins that watch it register again, as with a restarted kubelet. One
// that another process still serves (a kubelet on the same host, another staticpod)
// is left to it: device plugins are off, and the log says why. A nil Manager waits for
// ctx.
func (m *Manager) Run(ctx context.Context) error {
	if m == nil {
		<-ctx.Done()
		return nil
	}
	if err := os.MkdirAll(m.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("device plugin dir: %w", err)
	}
	sock := filepath.Join(m.cfg.Dir, socketName)
	if len(sock) > maxSocketPath {
		return fmt.Errorf("device plugin socket %s: its path has %d bytes, more than the %d a unix socket's may have: give --device-plugin-dir a shorter directory", sock, len(sock), maxSocketPath)
	}
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		c.Close()
		m.log.Warn("device plugins are off: another process serves their registrations (a kubelet?); give staticpod a directory of its own with --device-plugin-dir", "socket", sock)
		<-ctx.Done()
		return nil
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("device plugin socket: %w", err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("device plugin socket: %w", err)
	}
	m.mu.Lock()
	m.runCtx = ctx
	m.mu.Unlock()
	close(m.serving)
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registration{m: m})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	m.log.Info("serving device plugin registrations", "socket", sock)
	select {
	case <-ctx.Done():
		srv.Stop()
		<-served
		err = nil
	case err = <-served:
	}
	m.endpoints.Wait() // they end with ctx
	_ = os.Remove(sock)
	if err != nil {
		return fmt.Errorf("serve device plugin registrations: %w", err)
	}
	return nil
}

// Serving is closed once plugins can register.
func (m *Manager) Serving() <-chan struct{} { return m.serving }

// Changed is told when devices were registered, came back healthy or went: pods
// refused for want of devices may be admitted again. Nil for a nil Manager.
func (m *Manager) Changed() <-chan struct{} {
	if m == nil {
		return nil
	}
	return m.changed
}

func (m *Manager) notify() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// put records an assignment. m.mu is held, or m is not shared yet.
func (m *Manager) put(a *Assignment) {
	byContainer := m.assigned[a.Pod]
	if byContainer == nil {
		byContainer = map[string]map[string]*Assignment{}
		m.assigned[a.Pod] = byContainer
	}
	byResource := byContainer[a.Container]
	if byResource == nil {
		byResource = map[string]*Assignment{}
		byContainer[a.Container] = byResource
	}
	byResource[a.Resource] = a
}

// save writes the checkpoint. m.mu is held.
func (m *Manager) save() error {
	var as []Assignment
	for _, byContainer := range m.assigned {
		for _, byResource := range byContainer {
			for _, a := range byResource {
				as = append(as, *a)
			}
		}
	}
	return writeCheckpoint(m.cfg.Checkpoint, as)
}

// inUse are the devices of resource given to any container. m.mu is held.
func (m *Manager) inUse(resource string) map[string]bool {
	used := map[string]bool{}
	for _, byContainer := range m.assigned {
		for _, byResource := range byContainer {
			if a := byResource[resource]; a != nil {
				for _, id := range a.DeviceIDs {
					used[id] = true
				}
			}
		}
	}
	return used
}

// Healthy is how many devices of resource are healthy, given out or not; 0 when no
// plugin registered it.
func (m *Manager) Healthy(resource string) int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	if r := m.resources[resource]; r != nil {
		for _, healthy := range r.devices {
			if healthy {
				n++
			}
		}
	}
	return n
}
