package containerdrt

import (
	"fmt"
	"path/filepath"
	"strings"
)

// unixScheme is how the kubelet's --container-runtime-endpoint spells a unix socket.
const unixScheme = "unix://"

// SocketPath returns the path of containerd's socket given as address: a path, or a
// unix:// URL as the kubelet's --container-runtime-endpoint takes it
// (unix:///run/containerd/containerd.sock). Any other scheme is refused: containerd's
// client reaches a local socket only.
func SocketPath(address string) (string, error) {
	path := address
	if rest, ok := strings.CutPrefix(address, unixScheme); ok {
		path = rest
	} else if scheme, _, ok := strings.Cut(address, "://"); ok {
		return "", fmt.Errorf("containerd address %q: %s:// is no unix socket; give a path or unix:///path", address, scheme)
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("containerd address %q: the socket's path must be absolute", address)
	}
	return filepath.Clean(path), nil
}

// canonicalSocket is the one spelling of a containerd's address that addresses are compared
// in: its socket's path, with the symlinks of the socket's directory resolved, so that
// /var/run/containerd/containerd.sock (/var/run links to /run) and
// unix:///run/containerd/containerd.sock are the containerd at
// /run/containerd/containerd.sock. An address that is no socket path is returned as
// given: it equals no other.
func canonicalSocket(address string) string {
	path, err := SocketPath(address)
	if err != nil {
		return address
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		path = filepath.Join(dir, filepath.Base(path))
	}
	return path
}
