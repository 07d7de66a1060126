// Package spec builds a container's OCI spec as containerd options (oci.SpecOpts), one
// concern per file: the process and its environment (process.go, env.go, with the
// downward API's values in downward.go), resources and the OOM score (resources.go,
// oom.go), security and seccomp (security.go, seccomp.go), the cgroupfs (cgroups.go),
// mounts (mounts.go), the pod's sysctls (sysctls.go), namespaces and the shim group
// (spec.go) and CDI devices (cdi.go), assembled by Container from an Input.
//
// Building a spec writes nothing and mounts nothing: the host side of every mount (a
// hostPath's directory, a subPath's bind, the pod's /etc files and /dev/shm, the
// termination-message file) is made before, by package poddir, and named in
// Input.Prepared; the CDI specs are read before, by the runtime, into Input.CDI. What
// the builders still read of the host, each once per call unless said: staticpod's own
// oom_score_adj (OwnOOMScoreAdj), /proc/meminfo (MemTotal, for a Burstable container's
// score and a resourceFieldRef without a limit), the CPUs this process may use and a
// statfs of the pod's directory (a resourceFieldRef without a limit), staticpod's
// capabilities (when a container adds some), a Localhost seccomp profile's file, the
// host files of CDI device nodes (their type, numbers and mode, as the CDI library
// fills them in), and, once per process, the host's cgroup setup (HostCgroups) and
// whether it accounts swap (SwapAccounted).
//
// It imports containerd's pkg/oci and its types only (no client, no calls to the
// daemon), the CDI project's library, manifests, and runner for its error classes; it
// must not import package poddir, which imports it (for Input and the downward API's
// values, which environment variables and downwardAPI volume files share).
package spec
