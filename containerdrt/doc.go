// Package containerdrt implements the runner's Runtime on containerd through its native
// v2 Go client: sandboxes (pinned namespaces, or a pause process for a shared PID
// namespace), containers and their OCI specs, pod directories and volumes, tasks, logs,
// exec, listing and repair. Images (package images: pulls, credentials, --image-dir
// imports, the store's side of garbage collection), pod networks (package podnet),
// cgroups (package cgroups) and the process side of repair (package shims: shims, log
// writers, runc's state) are packages of their own below it.
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
// repairs. The process side of that repair (finding and trusting shims and log writers
// under /proc, signalling them, runc's stale state and containerd's task bundles) is
// package containerdrt/shims; talking to a shim over its task API is this package's
// (lostshims.go).
//
// A pod's host side is made before its containers, as the kubelet makes a pod's
// cgroup and mounts its volumes before it asks its runtime for containers:
// PreparePod makes the pod's cgroup (package cgroups) and its directory with the /etc
// files and volumes (package poddir), and resolves once per sync what the pod's sandbox
// and containers share (runner.PodConfig: its directories, user namespace, cgroup,
// runtime handler, hostname), which the runner hands back to StartSandbox and
// CreateContainer, as the kubelet resolves a pod's sandbox config once per sync. A
// sandbox or a container is made from that and what it adds (IDs, network, labels),
// read into a plan (podplan.go), not from the pod. A container is then created in two
// steps (CreateContainer): package poddir prepares the host side of the container's own
// mounts (hostPaths, subPaths, /dev/shm, the termination-message file; this package
// mounts the images of image volumes there first, imagevolume.go), then package spec
// assembles its OCI spec from oci.SpecOpts per concern, writing nothing.
//
// It imports manifests, logs, its own images, cgroups (the cgroup driver, pod cgroups
// and their limits), podnet (pod networks), pins (a pod's namespaces pinned as files),
// shims, poddir and spec, and runner for the Runtime contract and its types only.
package containerdrt
