package containerdrt

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/staticpod/staticpod/runner"
)

// Dial connects to address from inside the network namespace of sandbox, so that
// probes and hooks reach a pod that has no network but its own loopback, as the
// kubelet reaches a pod's IP. With no sandbox (a host-network pod) it dials from the
// host.
//
// A socket belongs to the network namespace of the thread that creates it, and keeps
// it; so the socket is created on a locked thread that enters the pod's namespace and
// comes back before the thread is unlocked, and the connection then works from any
// goroutine.
func (r *Runtime) Dial(ctx context.Context, sandbox *runner.Container, network, address string) (net.Conn, error) {
	var d net.Dialer
	ns := r.sandboxNamespaces(sandbox)
	if ns == "" {
		return d.DialContext(ctx, network, address)
	}
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		conn, err := dialInNetns(ctx, filepath.Join(ns, "net"), network, address)
		done <- result{conn, err}
	}()
	res := <-done
	return res.conn, res.err
}

// dialInNetns must run on its own goroutine: it locks the thread, and if the thread
// cannot be brought back to the host's namespace it stays locked, so Go discards it
// when the goroutine ends instead of reusing a thread in the wrong namespace.
func dialInNetns(ctx context.Context, path, network, address string) (net.Conn, error) {
	runtime.LockOSThread()
	host, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("dial %s in pod: %w", address, err)
	}
	defer unix.Close(host)
	pod, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("dial %s in pod: open network namespace: %w", address, err)
	}
	defer unix.Close(pod)
	if err := unix.Setns(pod, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("dial %s in pod: enter network namespace: %w", address, err)
	}
	// The socket is created on this thread, so it belongs to the pod's namespace. No
	// parallel dial of a second address family: its socket would be made by another
	// goroutine, on a thread in the host's namespace.
	d := net.Dialer{FallbackDelay: -1}
	conn, dialErr := d.DialContext(ctx, network, address)
	if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it dies with this goroutine.
		if conn != nil {
			conn.Close()
		}
		return nil, fmt.Errorf("dial %s in pod: return to the host network namespace: %w", address, err)
	}
	runtime.UnlockOSThread()
	return conn, dialErr
}
