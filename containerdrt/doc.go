// Package containerdrt implements the runner's Runtime on containerd through its native
// v2 Go client: images (pulls, credentials, --image-dir imports, the image store's side
// of garbage collection), sandboxes (pinned namespaces, or a pause process for a shared
// PID namespace), pod networks (CNI), cgroups, containers and their OCI specs, pod
// directories and volumes, tasks, logs, exec, listing and repair. Pod networks
// (package podnet) and cgroups (package cgroups) are packages of their own below it;
// the rest is one package still, not yet laid out along those seams.
//
// It executes what the runner planned and reports what it sees; which pod and which
// container should run is the runner's to decide. List only reads (list.go). What a
// crash, a killed process or a lost shim left behind is mended in a step of its own,
// Repair (repair.go), which the runner calls after each relist and before it acts on
// it: it records the exits of stopped tasks and deletes the tasks, and ends
// interrupted creations, sandboxes whose network setup was interrupted, the processes
// of containers whose shim is gone, pins and shims containerd lost track of. Those
// endings are the runtime's own decisions, about what a crash left; the runner sees
// their result at the next relist. A Runtime that only observes (Config.Observe) never
// repairs.
//
// The OCI spec is assembled from oci.SpecOpts per concern (spec.go and the spec_*.go
// files), but building them is not pure yet: it reads the host, and mounts.go prepares
// the host side of hostPath, subPath, /dev/shm and termination-message mounts as it
// builds them. The pod's own files are written before, by preparePod (poddir.go).
//
// It imports manifests, logs, internal/pause (loopback in a pinned sandbox), its own
// cgroups (the cgroup driver, pod cgroups and their limits) and podnet (pod networks),
// and runner for the Runtime contract and its types only.
package containerdrt
