// Package sysctl holds the kubelet's rules for a pod's sysctls, as pure functions and
// types: which kernel namespace a sysctl belongs to, which sysctls are safe on a kernel
// release, and the allowlist that --allowed-unsafe-sysctls adds to them, with its
// checks. Admitting or rejecting a pod by them is the runner's (restrict.Sysctls);
// setting them in a container is the runtime's.
//
// It imports only manifests (a sysctl's dotted name): never the runner, the runtime
// or containerd.
package sysctl
