// Package cgroups places pods and their containers in cgroups as the kubelet does: the
// cgroup driver (cgroupfs or systemd, settled against containerd's CRI configuration),
// the layout of pod cgroups under a root by QoS class, a container's cgroupsPath and
// runc options, the pod cgroup made with its limits (the sum of its containers') and
// removed with the pod, the kubelet's CPU conversions, and the host's cgroup files it
// reads (cgroup v2 or not, OOM kill counts).
//
// It imports manifests (QoS class, pod limits, UID check) and internal/systemd (pod
// slices), and containerd only for the options it hands to a new container. It must
// not import containerdrt or runner: it knows pods and cgroups, not the runtime.
package cgroups
