package devices

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// callTimeout bounds each call to a plugin: admission waits on Allocate.
const callTimeout = 10 * time.Second

// endpoint is the connection to one registered plugin. Its ListAndWatch runs until
// the plugin goes, a newer registration of the resource replaces it (stop), or
// staticpod stops.
type endpoint struct {
	m        *Manager
	resource string
	socket   string
	opts     *pluginapi.DevicePluginOptions // as registered; asked with GetDevicePluginOptions when none
	cancel   chan struct{}                  // closed by stop
	conn     *grpc.ClientConn               // set by run before the first ListAndWatch answer is applied
	client   pluginapi.DevicePluginClient
}

func newEndpoint(m *Manager, resource, socket string, opts *pluginapi.DevicePluginOptions) *endpoint {
	return &endpoint{m: m, resource: resource, socket: socket, opts: opts, cancel: make(chan struct{})}
}

// stop ends the endpoint's ListAndWatch. m.mu is held.
func (e *endpoint) stop() {
	select {
	case <-e.cancel:
	default:
		close(e.cancel)
	}
}

// run dials the plugin and follows its ListAndWatch: each answer replaces the
// resource's devices and their health. When the stream ends, the devices of the
// resource become unhealthy (none is given out) until the plugin registers again;
// those given out stay assigned.
func (e *endpoint) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	go func() {
		select {
		case <-e.cancel:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := e.follow(ctx)
	e.m.mu.Lock()
	if res := e.m.resources[e.resource]; res != nil && res.ep == e {
		for id := range res.devices {
			res.devices[id] = false
		}
		res.ep = nil
	}
	e.m.mu.Unlock()
	select {
	case <-e.cancel: // replaced by a newer registration: nothing to tell
	default:
		if parent.Err() == nil {
			e.m.log.Warn("device plugin gone", "resource", e.resource, "err", err)
		}
	}
	e.m.notify()
}

func (e *endpoint) follow(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+e.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", e.socket, err)
	}
	defer conn.Close()
	client := pluginapi.NewDevicePluginClient(conn)
	if e.opts == nil {
		octx, cancel := context.WithTimeout(ctx, callTimeout)
		opts, err := client.GetDevicePluginOptions(octx, &pluginapi.Empty{})
		cancel()
		if err != nil {
			return fmt.Errorf("device plugin options: %w", err)
		}
		e.m.mu.Lock()
		e.opts = opts
		e.m.mu.Unlock()
	}
	e.m.mu.Lock()
	e.conn, e.client = conn, client
	e.m.mu.Unlock()
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return fmt.Errorf("list and watch: %w", err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("list and watch: %w", err)
		}
		e.update(resp.Devices)
	}
}

// update replaces the resource's devices with what ListAndWatch answered.
func (e *endpoint) update(devs []*pluginapi.Device) {
	e.m.mu.Lock()
	res := e.m.resources[e.resource]
	if res == nil || res.ep != e {
		e.m.mu.Unlock()
		return
	}
	res.devices = make(map[string]bool, len(devs))
	healthy := 0
	for _, d := range devs {
		res.devices[d.ID] = d.Health == pluginapi.Healthy
		if d.Health == pluginapi.Healthy {
			healthy++
		}
	}
	e.m.mu.Unlock()
	e.m.log.Info("device plugin devices", "resource", e.resource, "devices", len(devs), "healthy", healthy)
	e.m.notify()
}

// options are the plugin's options; none when it has not answered yet. m.mu is held.
func (e *endpoint) options() *pluginapi.DevicePluginOptions {
	if e.opts == nil {
		return &pluginapi.DevicePluginOptions{}
	}
	return e.opts
}

// preferred asks the plugin which size devices of available it prefers, those of
// mustInclude among them. m.mu is held (the call is short and bounded).
func (e *endpoint) preferred(ctx context.Context, available, mustInclude []string, size int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := e.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: available, MustIncludeDeviceIDs: mustInclude, AllocationSize: int32(size),
		}},
	})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		return nil, fmt.Errorf("%d preferred allocations for 1 request", len(resp.ContainerResponses))
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}

// allocate calls the plugin's Allocate for one container's devices.
func (e *endpoint) allocate(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := e.client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		return nil, fmt.Errorf("%d allocations for 1 request", len(resp.ContainerResponses))
	}
	return resp.ContainerResponses[0], nil
}

// preStart calls the plugin's PreStartContainer before a container with its devices
// is created.
func (e *endpoint) preStart(ctx context.Context, ids []string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := e.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids})
	return err
}
