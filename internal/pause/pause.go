// Package pause is the sandbox process of a pod whose containers share a PID namespace:
// it holds the pod's network, IPC, UTS and PID namespaces for the pod's containers to
// join, brings loopback up, reaps the zombies it inherits as init, and exits on SIGTERM
// or SIGINT. The helper program runs it (`staticpod-helper pause`; staticpod's hidden
// "pause" command has the same argv, for sandboxes an older staticpod made) from a
// read-only root that holds only that program, so that no pause image is ever pulled.
// Other pods have pinned namespaces and no process; containerdrt brings their loopback
// up with LoopbackUp.
//
// It imports nothing of staticpod's.
package pause

import (
	"fmt"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// signals is subscribed in init, as early as a Go program can, when the process is the
// pause command: as PID 1 of a PID namespace a signal without a handler is not
// delivered, and Go's default handling of SIGTERM then ends in exit(2). A SIGTERM that
// comes while the runtime itself starts can still end that way; it is a sandbox being
// stopped either way.
var signals = make(chan os.Signal, 8)

func init() {
	if len(os.Args) > 1 && os.Args[1] == "pause" {
		signal.Notify(signals, unix.SIGTERM, unix.SIGINT, unix.SIGCHLD)
	}
}

// Run holds the namespaces until SIGTERM or SIGINT. It returns nil on those signals.
func Run() error {
	signal.Notify(signals, unix.SIGTERM, unix.SIGINT, unix.SIGCHLD)
	if err := LoopbackUp(); err != nil {
		// runc brings loopback up in a new network namespace already; this is a second
		// try for runtimes that do not, so a failure is reported but not fatal.
		fmt.Fprintf(os.Stderr, "pause: %v\n", err)
	}
	for sig := range signals {
		if sig == unix.SIGCHLD {
			reap()
			continue
		}
		return nil
	}
	return nil
}

// reap collects every exited child. As PID 1 of a shared PID namespace the sandbox
// inherits the orphans of every container, and their zombies would pile up otherwise.
func reap() {
	for {
		var status unix.WaitStatus
		pid, err := unix.Wait4(-1, &status, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// LoopbackUp sets the IFF_UP flag of "lo" in the current network namespace.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback up: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: get flags: %w", err)
	}
	if ifr.Uint16()&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: set flags: %w", err)
	}
	return nil
}
