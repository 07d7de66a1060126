// Package manifests turns the bytes of a static-pod manifest into pods a runner can
// trust: it decodes YAML or JSON (a Pod, a PodList or List of pods, or several YAML
// documents), applies the defaults the apiserver would, validates the result with the
// Kubernetes rules that matter on one node plus the rules of static pods, and gives each
// pod its static identity (name suffix, UID, annotations) and each container a spec hash.
// It owns the questions the runner and the runtime both ask of a pod, answered once:
// its key, its QoS class, whether a container is a sidecar, whether the pod shares a
// PID namespace, the hash of what its sandbox is made from (SandboxHash), the CDI
// devices its annotations ask for (CDIDevices), and whether a UID is a plain token
// (CheckUID, which containerd's labels pass too).
// The ConfigMaps and Secrets of a manifest are decoded, defaulted and validated beside
// its pods (Objects), and References checks what a pod reads against the objects of its
// source.
//
// It owns no I/O: callers hand it bytes and a source location. It imports nothing of
// staticpod's and never touches the filesystem or containerd.
package manifests
