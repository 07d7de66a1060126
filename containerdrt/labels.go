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
	LabelHash         = labelPrefix + "hash"                     // manifests.ContainerHash of its spec
	LabelSource       = labelPrefix + "source"                   // the manifest source: file, http, api
	LabelStopSignal   = labelPrefix + "stop-signal"              // the image's StopSignal, or empty
	LabelLogPath      = labelPrefix + "log-path"                 // its CRI log file
	LabelTermination  = labelPrefix + "termination-message-path" // host path of the termination log
	LabelTermPolicy   = labelPrefix + "termination-message-policy"

	// Set when the task starts and when its exit is recorded (see reap): containerd
	// keeps neither once a task is deleted.
	labelStartedAt  = labelPrefix + "started-at"
	labelFinishedAt = labelPrefix + "finished-at"
	labelExitCode   = labelPrefix + "exit-code"
	labelReason     = labelPrefix + "reason"
	labelMessage    = labelPrefix + "message"
	// labelMessagePending marks an exit recorded before its message, which comes from
	// the log once the task is deleted (see reap).
	labelMessagePending = labelPrefix + "message-pending"
	labelImageID        = labelPrefix + "image-id" // the image's digest, reported as imageID
)
