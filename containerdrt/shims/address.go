package shims

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// socket is the identity of a containerd's address that addresses are compared by,
// however each is spelled: the socket file its path names, every symlink followed,
// when there is one, so that a symlink to the socket file
// (/run/containerd/containerd.sock -> /run/k3s/containerd/containerd.sock, as k3s
// sets up) and a path through a symlinked directory (/var/run -> /run) are the socket
// they lead to. A shim's -address is the path containerd was started with, which need
// not be the one staticpod was given. Where either file is missing (containerd is
// down), the canonical spelling of the paths is compared instead (canonicalSocket).
type socket struct {
	path     string // canonicalSocket's
	dev, ino uint64
	found    bool // dev and ino are the socket file's
}

// statSocket looks up the file a socket's path names (os.Stat); a test sees through it
// which paths are looked up.
var statSocket = os.Stat

// socketOf returns the identity of the socket at address (see socket).
func socketOf(address string) socket {
	path, err := SocketPath(address)
	if err != nil {
		return socket{path: address}
	}
	s := socket{path: path}
	if fi, err := statSocket(path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			s.dev, s.ino, s.found = st.Dev, st.Ino, true
		}
	}
	s.path = canonicalSocket(path)
	return s
}

// is reports whether s and o are the same socket.
func (s socket) is(o socket) bool {
	if s.found && o.found {
		return s.dev == o.dev && s.ino == o.ino
	}
	return s.path == o.path
}

// SameSocket reports whether addresses a and b name the same containerd socket: the
// same socket file, every symlink followed, or, where either is missing, the same
// canonical path (see socket). An address that is no socket path equals no other
// address but itself.
func SameSocket(a, b string) bool {
	return socketOf(a).is(socketOf(b))
}

// canonicalSocket is the one spelling of a socket's path (see SocketPath) that
// addresses are compared in when their files cannot be: its symlinks resolved, or,
// when it is missing, those of its directory, so that
// /var/run/containerd/containerd.sock (/var/run links to /run) is
// /run/containerd/containerd.sock whether or not containerd runs.
func canonicalSocket(path string) string {
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		return resolved
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path))
	}
	return path
}
