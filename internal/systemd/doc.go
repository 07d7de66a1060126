// Package systemd is what staticpod says to systemd and logind: the service manager's
// notify protocol (readiness, status, watchdog pings), logind's delay inhibitor lock,
// its InhibitDelayMaxSec and its shutdown signal, the daemon's logger, whose lines
// carry no time when stderr is the journal's stream (NewLogger, ToJournal), the pod
// slices of the systemd cgroup driver with their limits (EnsureSlice), and stopping
// units over D-Bus. It imports nothing of staticpod's; every call is harmless where
// systemd is not running (no NOTIFY_SOCKET, no system bus): the caller decides what
// that means.
package systemd
