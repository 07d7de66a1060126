// Package podnet gives pods their network through CNI, as a kubelet with containerd's
// CRI does. A pod with a network namespace of its own gets a pod network: the plugins
// of the first network configuration in the configuration directory are run (through
// github.com/containerd/go-cni) on the pod's pinned network namespace when its sandbox
// is made, and run again to tear it down (addresses released, veths, routes and
// iptables rules removed) before the namespace is unpinned. A sandbox records what its
// teardown needs (a Record: the configuration it was set up with, its port mappings,
// its pod's names) in its labels and in its pin directory, so that it is torn down as
// it was set up whatever happened meanwhile: the pod's manifest deleted while staticpod
// was down, the configuration edited, containerd's records lost. Without any
// configuration, pods have loopback only. It also writes the default pod network's
// configuration, a bridge (`staticpod run --cni-default-bridge`), and keeps the one
// masquerade a network's configuration asks staticpod for (masquerade.go).
//
// It owns the configuration directory's reading, the plugins' ADD and DEL and the
// record; where a sandbox keeps its record (labels, pin directory) is containerdrt's.
// It imports nothing of staticpod's but internal/atomicfile, and must not import
// containerdrt or runner: it knows pods and CNI, not containers.
package podnet
