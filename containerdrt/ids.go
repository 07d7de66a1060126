package containerdrt

import (
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// containerd refuses IDs over 76 characters; readable IDs keep the pod name first and
// shorten it when needed, while the UID prefix keeps them unique.
const (
	maxIDLength = 76
	uidPrefix   = 8
)

// containerID is a readable, unique containerd ID for attempt of container in pod:
// "<pod name>_<container>_<attempt>_<uid prefix>". Pod and container names are DNS
// names, so the result always matches containerd's ID rules.
func containerID(pod *corev1.Pod, container string, attempt int) string {
	return makeID(pod.Name, container+"_"+strconv.Itoa(attempt), pod.UID)
}

// sandboxID is the ID of a pod's sandbox: "<pod name>_<attempt>_<uid prefix>"; one
// field fewer than a container's, so the two never collide.
func sandboxID(pod *corev1.Pod, attempt int) string {
	return makeID(pod.Name, strconv.Itoa(attempt), pod.UID)
}

func makeID(podName, rest string, uid types.UID) string {
	u := strings.NewReplacer("-", "", "_", "", ".", "").Replace(string(uid))
	if len(u) > uidPrefix {
		u = u[:uidPrefix]
	}
	if u == "" {
		u = "0"
	}
	tail := "_" + rest + "_" + u
	if room := maxIDLength - len(tail); len(podName) > room {
		podName = strings.TrimRight(podName[:room], "-.")
	}
	return podName + tail
}

// maxGraceSeconds is the longest grace period a label may give: longer would overflow a
// time.Duration.
const maxGraceSeconds = int64(math.MaxInt64 / time.Second)
