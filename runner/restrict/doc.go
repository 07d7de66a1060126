// Package restrict says what pods of each source may ask for: privileged containers,
// the host's network, PID and IPC namespaces, host paths (Restrictions, with the
// flags that set them), and which sysctls pods may set (Sysctls, the kubelet's safe set
// and --allowed-unsafe-sysctls). A pod that asks for more is Forbidden, in the
// kubelet's words and reasons; the runner's admission refuses it. It is pure: it
// imports manifests and runner/sysctl only.
package restrict
