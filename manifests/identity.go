package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Source kinds, the values of the kubernetes.io/config.source annotation.
const (
	SourceFile = "file"
	SourceHTTP = "http"
	SourceAPI  = "api"
)

// Annotations staticpod sets on every static pod. The first three are the kubelet's.
const (
	AnnotationSource   = "kubernetes.io/config.source"
	AnnotationHash     = "kubernetes.io/config.hash"
	AnnotationSeen     = "kubernetes.io/config.seen"
	AnnotationLocation = "staticpod.io/config.location" // file path, URL or pushed name
)

// Annotations of rollbacks (the runner's revisions): the progress deadline a manifest
// may set, in whole seconds above 0, and the two a rolled-back pod is served with: the
// revision (UID) its source asks for, and why that one does not run.
const (
	AnnotationProgressDeadline = "staticpod.io/progress-deadline-seconds"
	AnnotationRolledBackFrom   = "staticpod.io/rolled-back-from"
	AnnotationRollbackReason   = "staticpod.io/rollback-reason"
)

// Hash schemes. They are part of every hash they produce, and they never change: a new
// way of hashing gets a new version, so that upgrading staticpod never silently gives
// every running pod a new UID (and a restart), as kubelet upgrades have done.
const (
	uidScheme           = "staticpod-uid-v1"
	containerHashScheme = "staticpod-container-v1"
)

// Source is where a manifest came from.
type Source struct {
	Kind     string // SourceFile, SourceHTTP or SourceAPI
	Location string // file path, URL, or the name a manifest was pushed under, as shown
	// Key is what UIDs hash in place of Location when Location is not the source's
	// own spelling: a URL shown with its query values redacted hashes the URL as
	// written, so that redacting changed no pod's UID. Empty means Location.
	Key string
}

func (s Source) String() string { return s.Kind + ":" + s.Location }

// UID is the static identity of a defaulted pod read from src on node: a hash of the
// pod's canonical v1 JSON, the node name and the source location (a URL alone for the
// http source, as the kubelet does, so that every node of a fleet agrees). Any change of
// the manifest's content therefore makes a new pod.
func UID(pod *corev1.Pod, node string, src Source) types.UID {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", uidScheme)
	key := src.Location
	if src.Key != "" {
		key = src.Key
	}
	if src.Kind == SourceHTTP {
		fmt.Fprintf(h, "url:%s\n", key)
	} else {
		fmt.Fprintf(h, "host:%s\n%s:%s\n", node, src.Kind, key)
	}
	writeJSON(h, pod)
	return types.UID(hex.EncodeToString(h.Sum(nil))[:32])
}

// Fingerprint identifies a loaded pod by its content: its canonical v1 JSON, metadata
// (UID, labels, annotations) and spec alike. Two loads of one manifest have equal
// fingerprints, and any change of what the manifest says changes the fingerprint. Ask
// it, never the UID, whether a pod changed: a UID given in the manifest stays while
// the spec under it is edited (a derived UID would change too, see UID).
func Fingerprint(pod *corev1.Pod) string {
	h := sha256.New()
	writeJSON(h, pod)
	return hex.EncodeToString(h.Sum(nil))
}

// StaticName is the name a static pod runs under on node, as the kubelet names it.
func StaticName(name, node string) string {
	return name + "-" + strings.ToLower(node)
}

// Identify gives a defaulted and validated pod its static identity: the UID (a
// metadata.uid given in the manifest is kept), the name suffixed with the node name,
// spec.nodeName and the config annotations. It must run after Default, and only once.
func Identify(pod *corev1.Pod, node string, src Source) {
	if pod.UID == "" {
		pod.UID = UID(pod, node, src)
	}
	pod.Name = StaticName(pod.Name, node)
	pod.Spec.NodeName = node
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationSource] = src.Kind
	pod.Annotations[AnnotationHash] = string(pod.UID)
	pod.Annotations[AnnotationLocation] = src.Location
	if src.Kind == SourceFile {
		tolerateNoExecute(pod)
	}
	pod.Status.Phase = corev1.PodPending
}

// tolerateNoExecute adds the toleration the kubelet gives file pods, so that a mirror of
// the pod on a cluster is never evicted for node problems.
func tolerateNoExecute(pod *corev1.Pod) {
	t := corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	for _, have := range pod.Spec.Tolerations {
		if have.MatchToleration(&t) {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
}

// ContainerHash is the hash of a defaulted container's spec. It is stored as a label on
// the container in the runtime, so that after a restart staticpod can tell a running
// container that still matches its manifest (and adopt it) from one that does not.
func ContainerHash(c *corev1.Container) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", containerHashScheme)
	writeJSON(h, c)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// writeJSON writes the canonical JSON of v: encoding/json orders struct fields by
// declaration and map keys by value, so equal objects always hash alike.
func writeJSON(h hash.Hash, v any) {
	if err := json.NewEncoder(h).Encode(v); err != nil {
		fmt.Fprintf(h, "%#v", v) // API types always encode; never panic on input
	}
}
