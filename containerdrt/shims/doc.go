// Package shims finds and ends, at the level of processes, the containerd shims of a
// namespace and the log writers they started, and mends what runc and containerd leave
// on the disk when a creation is cut short. It owns:
//
//   - finding shims and log writers under /proc (Find, Lost), trusting a process only
//     for what nobody but root can fake: its binary (a containerd shim's, or
//     staticpod's helper), its owner (root, in the host's root directory) and its start
//     time, which tells it from a process that took its PID since it was looked at
//     (Signal);
//   - telling whether a shim's -address names the runtime's containerd, however either
//     is spelled (SocketPath, SameSocket);
//   - the shims containerd lost track of, confirmed at a second look (Lost), and the
//     shims of a namespace that was deleted (Kill);
//   - runc's state dirs (RemoveStaleRuncState) and containerd's task bundles, opened
//     without following links (StaleBundle, RemoveStaleBundle, RestoreBundle).
//
// It reads /proc and the filesystem, and sends signals. It must not import
// containerd's client nor talk to containerd or to a shim: the containerd it imports is
// what a container ID may be (identifiers) and the type of a listed task. Asking a shim
// to end a container over its task API, with containerd's errors classed for the
// runner, is containerdrt's (lostshims.go), which calls it; so is when to look (the
// repairs). Of staticpod's packages it imports only internal/proc, the one reader of
// /proc, and logs, for the command line of a log writer.
package shims
