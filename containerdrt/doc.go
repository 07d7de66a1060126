// Package containerdrt implements the runner's Runtime on containerd through its native
// v2 Go client: images, sandboxes, containers, tasks, logs, listing and repair.
//
// It executes what the runner planned and reports what it sees; which container
// starts, restarts or stops is the runner's to decide. List only reads (list.go).
// What a crash, a killed process or a lost shim left behind is mended in a step of its
// own, Repair (repair.go), which the runner calls after each relist and before it acts
// on it: it records the exits of stopped tasks and deletes the tasks, and ends
// interrupted creations, sandboxes whose network setup was interrupted, the processes
// of containers whose shim is gone, pins and shims containerd lost track of. A Runtime
// that only observes (Config.Observe) never repairs.
//
// It imports manifests, logs, internal/pause (namespaces of a pinned sandbox),
// internal/systemd (the systemd cgroup driver), and runner for the Runtime contract and
// its types only.
package containerdrt
