// Package poddir makes a pod's directories after the kubelet's
// /var/lib/kubelet/pods/<uid>: <root-dir>/pods/<uid> for what outlives a boot,
// <run-dir>/pods/<uid> for what does not (see PreparePod). It makes everything else on
// the host that a pod's containers mount: the pod's /etc/hosts, /etc/hostname and /etc/resolv.conf (etc.go), its
// volumes (volumes.go: emptyDirs, tmpfs ones included, and configMap, secret,
// projected and downwardAPI volumes, written atomically as the kubelet's AtomicWriter
// does in projected.go), hostPath checks and the *OrCreate
// types (hostpath.go), subPaths bind-mounted safely (subpath.go), and for each
// container the termination-message file and the pod's /dev/shm (container.go). The
// images of image volumes are mounted by the runtime, which owns containerd's
// snapshots, at ImageVolumeDir; they are bound from there like any volume. It removes
// them all too (Remove, RemoveLogs for the pod's log directory).
//
// PreparePod and PrepareContainer run before a container's spec is built: what
// PrepareContainer returns (spec.Prepared) is all of the host that package spec names,
// so that building a spec writes nothing.
//
// It imports package spec (for its Input and the downward API's values, shared with
// environment variables), manifests and runner (its error classes); it must not import
// containerd's packages itself, nor containerdrt.
package poddir
