// Package containerdrt implements the runner's Runtime on containerd through its native
// v2 Go client: images (pulls, credentials, --image-dir imports, the image store's side
// of garbage collection), sandboxes (pinned namespaces, or a pause process for a shared
// PID namespace), pod networks (CNI), cgroups, containers and their OCI specs, pod
// directories and volumes, tasks, logs, exec, listing and repair. It is one package
// still, not yet laid out along those seams.
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
// A container is created in two steps: package poddir prepares the pod's directory
// and the host side of the container's mounts (hostPaths, subPaths, the pod's /etc
// files, /dev/shm, the termination-message file), then package spec assembles its OCI
// spec from oci.SpecOpts per concern, writing nothing (CreateContainer).
//
// It imports its packages spec and poddir, manifests, logs, internal/pause (loopback
// in a pinned sandbox), internal/systemd (pod slices under the systemd cgroup driver),
// and runner for the Runtime contract and its types only.
package containerdrt
