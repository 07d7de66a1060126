package containerdrt

import (
	"context"
	"fmt"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/handlers"
	"github.com/staticpod/staticpod/manifests"
)

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

// runtimeHandler is the handler pod runs under (manifests.RuntimeHandler, from objs,
// the objects of its source), the zero Handler for the runtime's default. A handler
// that is not known fails, naming the field, as the kubelet fails the sandbox of a
// pod whose RuntimeClass or handler its runtime does not have.
func (r *Runtime) runtimeHandler(pod *corev1.Pod, objs manifests.Objects) (handlers.Handler, error) {
	name, class := manifests.RuntimeHandler(pod, objs)
	if name == "" {
		return handlers.Handler{}, nil
	}
	if h, ok := r.handlers.Lookup(name); ok {
		return h, nil
	}
	known := strings.Join(r.handlers.Names(), ", ")
	if class != nil {
		return handlers.Handler{}, fmt.Errorf("spec.runtimeClassName: no runtime for %q is configured: RuntimeClass %s names handler %s, which is not one of this node's (%s); "+
			"add it with --runtime-handler %s=<OCI runtime binary or containerd runtime type>, or to containerd's CRI runtimes", name, class.Name, name, known, name)
	}
	return handlers.Handler{}, fmt.Errorf("spec.runtimeClassName: no runtime for %q is configured: no RuntimeClass %s is defined beside the pod, and %s is not one of this node's runtime handlers (%s); "+
		"add a RuntimeClass document, or the handler with --runtime-handler %s=<OCI runtime binary or containerd runtime type>", name, name, name, known, name)
}

// runtimeOpts are the container options that pick a container's runtime: the cgroup
// driver's (cgroupOpts: runc's SystemdCgroup under systemd) for the default handler,
// else h's, with the driver's SystemdCgroup for runc's shim.
func (r *Runtime) runtimeOpts(h handlers.Handler, cgroupOpts []client.NewContainerOpts) []client.NewContainerOpts {
	if h.Type == "" {
		return cgroupOpts
	}
	return h.Opts(r.cgroup.Driver() == cgroups.Systemd)
}
