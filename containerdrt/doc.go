// Package containerdrt implements the runner's Runtime on containerd through its native
// v2 Go client: images, sandboxes, containers, tasks, logs and listing. It executes and
// reports; it makes no lifecycle decisions. It imports manifests, and runner for the
// Runtime contract and its types only.
package containerdrt
