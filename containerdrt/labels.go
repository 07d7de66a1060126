package containerdrt

// Labels every staticpod container and sandbox carries in containerd, so that the whole
// picture can be rebuilt from containerd alone after staticpod restarts.
const (
	labelPrefix       = "io.staticpod."
	LabelKind         = labelPrefix + "kind"                     // sandbox | container
	LabelPodUID       = labelPrefix + "pod.uid"                  // the pod's UID
	LabelPodName      = labelPrefix + "pod.name"                 // the pod's (static) name
	LabelPodNamespace = labelPrefix + "pod.namespace"            // the pod's namespace
	LabelContainer    = labelPrefix + "container"                // the container's name
	LabelAttempt      = labelPrefix + "attempt"                  // restart count of this container
	LabelHash         = labelPrefix + "hash"                     // manifests.ContainerHash of its spec; on a sandbox, manifests.SandboxHash of its pod
	LabelSource       = labelPrefix + "source"                   // the manifest source: file, http, api
	LabelPodLocation  = labelPrefix + "pod.location"             // the pod's file, URL or pushed name (see podLabels)
	LabelStopSignal   = labelPrefix + "stop-signal"              // the image's StopSignal, or empty
	LabelLogPath      = labelPrefix + "log-path"                 // its CRI log file
	LabelTermination  = labelPrefix + "termination-message-path" // host path of the termination log
	LabelTermPolicy   = labelPrefix + "termination-message-policy"
	// What stopping a container needs once its pod's spec is gone (see runner.Container).
	LabelPodGrace = labelPrefix + "pod.termination-grace-period" // seconds
	LabelPreStop  = labelPrefix + "container.prestop"            // JSON: name, ports, lifecycle.preStop
	// LabelPodStartTime is the pod's status.startTime when it was made (RFC 3339),
	// from which a restarted staticpod counts the pod's active deadline.
	LabelPodStartTime = labelPrefix + "pod.start-time"

	// Set when the task starts and when its exit is recorded (see reap): containerd
	// keeps neither once a task is deleted.
	labelStartedAt  = labelPrefix + "started-at"
	labelFinishedAt = labelPrefix + "finished-at"
	labelExitCode   = labelPrefix + "exit-code"
	labelReason     = labelPrefix + "reason"
	// labelOOMKilled is set when the shim reports an OOM kill in the container's
	// cgroup (see recordOOM).
	labelOOMKilled = labelPrefix + "oom-killed"
	// labelPodOOMKills is the OOM kill count of the pod's cgroup when the container
	// was created (see oomKilled).
	labelPodOOMKills = labelPrefix + "pod-oom-kills"
	labelMessage     = labelPrefix + "message"
	// labelMessagePending marks an exit recorded before its message, which comes from
	// the log once the task is deleted (see reap).
	labelMessagePending = labelPrefix + "message-pending"
	labelImageID        = labelPrefix + "image-id" // the image's digest, reported as imageID
	// labelPinned marks a sandbox that is pinned namespaces, not a process: its value
	// is the directory of the pins (see pinned.go).
	labelPinned = labelPrefix + "pinned-namespaces"
	// labelPinnedFiles lists the namespace files there: net,uts[,ipc].
	labelPinnedFiles = labelPrefix + "pinned-namespaces.files"
	// labelSandbox names, on a container in a pinned sandbox, that sandbox: the shim
	// group the container's task belongs to (see keepTask).
	labelSandbox = labelPrefix + "sandbox"
	// labelStopDeadline is set when a stop begins: when its grace period ends.
	labelStopDeadline = labelPrefix + "stop-deadline"
	// labelNetwork, on a sandbox with a pod network, is what tears it down (a
	// podnet.Record as JSON), until it is torn down; labelPodIPs are its IPs, separated
	// by commas; labelNetworkNote, on a sandbox without one, says why.
	labelNetwork     = labelPrefix + "network"
	labelPodIPs      = labelPrefix + "pod-ips"
	labelNetworkNote = labelPrefix + "network-note"
)

// maxLabelSize is the most containerd keeps in one label, key and value together.
const maxLabelSize = 4096
