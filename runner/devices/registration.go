package devices

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registration is the Registration service plugins call on kubelet.sock.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
}

// Register accepts a plugin as the kubelet does: an API version it speaks, an
// extended resource name, an endpoint socket in the directory. Its endpoint is
// dialled afterwards, as the kubelet does: a plugin registers before it serves.
func (r registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if err := r.m.register(req); err != nil {
		r.m.log.Warn("device plugin refused", "resource", req.ResourceName, "endpoint", req.Endpoint, "err", err)
		return nil, err
	}
	return &pluginapi.Empty{}, nil
}

func (m *Manager) register(req *pluginapi.RegisterRequest) error {
	if !slices.Contains(pluginapi.SupportedVersions[:], req.Version) {
		return fmt.Errorf("register %s: version %q is not supported: %v", req.ResourceName, req.Version, pluginapi.SupportedVersions)
	}
	if !IsExtended(req.ResourceName) {
		return fmt.Errorf("register %s: not an extended resource name (vendor.com/name, outside kubernetes.io)", req.ResourceName)
	}
	if req.Endpoint == "" || filepath.Base(req.Endpoint) != req.Endpoint || req.Endpoint == socketName || strings.HasPrefix(req.Endpoint, ".") {
		return fmt.Errorf("register %s: endpoint %q is not a socket name in %s", req.ResourceName, req.Endpoint, m.cfg.Dir)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runCtx == nil || m.runCtx.Err() != nil {
		return fmt.Errorf("register %s: not serving", req.ResourceName)
	}
	res := m.resources[req.ResourceName]
	if res == nil {
		res = &resource{devices: map[string]bool{}}
		m.resources[req.ResourceName] = res
	}
	if res.ep != nil {
		res.ep.stop() // a plugin that restarted: its old connection goes
	}
	ep := newEndpoint(m, req.ResourceName, filepath.Join(m.cfg.Dir, req.Endpoint), req.Options)
	res.ep = ep
	m.endpoints.Add(1)
	go func() {
		defer m.endpoints.Done()
		ep.run(m.runCtx)
	}()
	m.log.Info("device plugin registered", "resource", req.ResourceName, "endpoint", req.Endpoint)
	return nil
}

// IsExtended reports whether name may be a device plugin's resource: a qualified
// name with a domain, outside kubernetes.io (the kubelet's IsExtendedResourceName).
func IsExtended(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") || strings.HasPrefix(name, "requests.") {
		return false
	}
	return len(validation.IsQualifiedName(name)) == 0
}
