// Package runner decides what runs: it merges the snapshots of the manifest sources,
// owns the sync loop, the pod workers, the PLEG and its cache, restart back-off, probes
// and pod status, and defines the Runtime interface it needs from a container runtime.
//
// It imports manifests and api/wire (the types of the API's answers it produces) and
// nothing else of staticpod's; in particular it never imports containerd. Only main (and tests) wire a concrete Runtime into it.
package runner
