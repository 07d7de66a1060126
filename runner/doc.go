// Package runner decides what runs: it merges the snapshots of the manifest sources
// (Config: one name and one UID per pod), admits pods (Admit: restrictions, AppArmor,
// host ports), and owns the sync loop, the pod workers, the PLEG and its cache, the
// pure Plan, restart back-off, probes and lifecycle hooks, pod status, events (kept in
// runner/events), finished-pod results, garbage collection, image GC's policy and
// collector, and stopping every pod (StopAll, StopForShutdown). It defines the Runtime interface it needs from a
// container runtime, and calls its Repair after each relist, before it acts on it.
//
// It imports manifests, api/wire (the types of the API's answers it produces) and the
// packages below it (runner/...: each a concern with rules of its own, such as the event
// log in runner/events, restart back-off in runner/backoff and the handlers of probes
// and hooks in runner/action, none of which imports the runner), and nothing else of
// staticpod's; in particular it never imports containerd. main and once wire a
// concrete Runtime into it, and tests a fake one.
package runner
