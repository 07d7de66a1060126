package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// Outside is a host beyond this one, for what pods send off the host: a network
// namespace of its own, joined to the host by a veth pair on a /24 of its own, with no
// route back to any pod network. A pod's packet that reaches it unmasqueraded gets no
// answer. It is removed, veths and all, when the test ends.
type Outside struct {
	IP     string // its address
	HostIP string // the host's end of the veth: the source of what the host masquerades towards it
	ns     string // the namespace's file
}

// NewOutside makes an outside host; it needs root and ip(8).
func NewOutside(t testing.TB) *Outside {
	t.Helper()
	subnet, err := freeTestSubnet()
	if err != nil {
		t.Fatal(err)
	}
	id := randomHex(3)
	name, host, peer := "sptest-out-"+id, "spoh"+id, "spoo"+id
	ip, hostIP := slices.Clone(subnet.IP.To4()), slices.Clone(subnet.IP.To4())
	ip[3], hostIP[3] = 2, 1
	o := &Outside{IP: ip.String(), HostIP: hostIP.String(), ns: filepath.Join("/run/netns", name)}
	t.Cleanup(func() {
		if err := run("ip", "netns", "del", name); err != nil { // its end of the veth pair goes with it, and so the host's
			t.Errorf("remove the outside host: %v", err)
		}
	})
	for _, cmd := range [][]string{
		{"netns", "add", name},
		{"link", "add", host, "type", "veth", "peer", "name", peer, "netns", name},
		{"addr", "add", o.HostIP + "/24", "dev", host},
		{"link", "set", host, "up"},
		{"-n", name, "addr", "add", o.IP + "/24", "dev", peer},
		{"-n", name, "link", "set", peer, "up"},
	} {
		if err := run("ip", cmd...); err != nil {
			t.Fatalf("make the outside host: %v", err)
		}
	}
	return o
}

// Listen listens on TCP port 0 of the outside host's address, in its namespace.
func (o *Outside) Listen(t testing.TB) net.Listener {
	t.Helper()
	var ln net.Listener
	err := o.do(func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(o.IP, "0"))
		return err
	})
	if err != nil {
		t.Fatalf("listen on the outside host: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// do runs fn on a thread in the outside host's network namespace: the sockets it makes
// stay there. The thread ends with fn's goroutine should it fail to come back.
func (o *Outside) do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- err
			return
		}
		defer home.Close()
		there, err := os.Open(o.ns)
		if err != nil {
			done <- err
			return
		}
		defer there.Close()
		if err := unix.Setns(int(there.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("enter %s: %w", o.ns, err)
			return
		}
		err = fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("leave %s: %w", o.ns, err) // the thread stays locked, and ends
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}
