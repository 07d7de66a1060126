// Package plugintest is a device plugin for tests, written against k8s.io/kubelet's
// deviceplugin v1beta1 API as vendors write theirs: it serves devices of one resource
// on a socket of the device plugin directory and registers them on kubelet.sock. Each
// device's Allocate answers an environment variable naming the devices and, for each,
// a character device of the host (/dev/null) at /dev/<device ID> in the container.
package plugintest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Env is the variable Allocate sets: the IDs of the devices, comma-separated.
const Env = "WIDGET_DEVICES"

// Plugin serves devices of Resource. Prefer, when set, is its preferred allocation
// (GetPreferredAllocationAvailable); PreStart asks for PreStartContainer calls.
type Plugin struct {
	Resource string
	Dir      string // the device plugin directory
	Name     string // its socket's name in Dir
	Prefer   func(available []string, size int) []string
	PreStart bool

	mu       sync.Mutex // guards health, watchers and the counts below
	health   map[string]string
	watchers []chan struct{}
	// Allocated are the device IDs of each Allocate call, in order; PreStarted those
	// of each PreStartContainer call.
	allocated  [][]string
	preStarted [][]string

	srv *grpc.Server
}

// New returns a plugin of ids, all healthy; Start serves it.
func New(dir, resource, name string, ids ...string) *Plugin {
	p := &Plugin{Resource: resource, Dir: dir, Name: name, health: map[string]string{}}
	for _, id := range ids {
		p.health[id] = pluginapi.Healthy
	}
	return p
}

// Start serves the plugin on its socket until Stop.
func (p *Plugin) Start() error {
	sock := filepath.Join(p.Dir, p.Name)
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listen %s: %w", sock, err)
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, server{p: p})
	go func() { _ = p.srv.Serve(lis) }()
	return nil
}

// Stop stops serving: its ListAndWatch streams end, as when a plugin exits.
func (p *Plugin) Stop() {
	if p.srv != nil {
		p.srv.Stop()
	}
}

// Register registers the plugin on kubelet.sock in its directory.
func (p *Plugin) Register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.Dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial kubelet.sock: %w", err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: p.Name, ResourceName: p.Resource,
		Options: &pluginapi.DevicePluginOptions{PreStartRequired: p.PreStart, GetPreferredAllocationAvailable: p.Prefer != nil},
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", p.Resource, err)
	}
	return nil
}

// SetHealth changes a device's health and tells every ListAndWatch.
func (p *Plugin) SetHealth(id string, healthy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.health[id] = pluginapi.Unhealthy
	if healthy {
		p.health[id] = pluginapi.Healthy
	}
	for _, w := range p.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// Allocated are the device IDs of each Allocate call so far.
func (p *Plugin) Allocated() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.allocated)
}

// PreStarted are the device IDs of each PreStartContainer call so far.
func (p *Plugin) PreStarted() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.preStarted)
}

func (p *Plugin) devices() []*pluginapi.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*pluginapi.Device
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range p.health {
			if !yield(id) {
				return
			}
		}
	}) {
		out = append(out, &pluginapi.Device{ID: id, Health: p.health[id]})
	}
	return out
}

type server struct {
	pluginapi.UnimplementedDevicePluginServer
	p *Plugin
}

func (s server) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: s.p.PreStart, GetPreferredAllocationAvailable: s.p.Prefer != nil}, nil
}

func (s server) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	changed := make(chan struct{}, 1)
	s.p.mu.Lock()
	s.p.watchers = append(s.p.watchers, changed)
	s.p.mu.Unlock()
	for {
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: s.p.devices()}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (s server) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, r := range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{
			DeviceIDs: s.p.Prefer(r.AvailableDeviceIDs, int(r.AllocationSize)),
		})
	}
	return resp, nil
}

func (s server) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, r := range req.ContainerRequests {
		s.p.mu.Lock()
		s.p.allocated = append(s.p.allocated, slices.Clone(r.DevicesIds))
		s.p.mu.Unlock()
		cr := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{Env: strings.Join(r.DevicesIds, ",")}}
		for _, id := range r.DevicesIds {
			cr.Devices = append(cr.Devices, &pluginapi.DeviceSpec{HostPath: "/dev/null", ContainerPath: "/dev/" + id, Permissions: "rw"})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cr)
	}
	return resp, nil
}

func (s server) PreStartContainer(_ context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	s.p.mu.Lock()
	s.p.preStarted = append(s.p.preStarted, slices.Clone(req.DevicesIds))
	s.p.mu.Unlock()
	return &pluginapi.PreStartContainerResponse{}, nil
}
