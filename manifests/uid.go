package manifests

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxUIDLength is the longest UID a manifest may give: room for a SHA-256 in hex, twice
// a UUID's 36 characters.
const MaxUIDLength = 64

// plainUID is the alphabet of a UID: a letter or digit, then letters, digits, '.' and
// '-'. The UIDs the kubelet and the apiserver make (UUIDs, hex hashes) and staticpod's
// own all fit. A UID names the pod's directory, its log directory (as the last of the
// '_'-separated parts, so no '_'), its cgroup and systemd slice (where '-' nests, and
// is written '_'), and is passed to CNI plugins in `K=V;K=V` arguments: so never '/',
// '_', '=', ';', glob metacharacters, NUL, "." or "..".
//
// It is checked by hand, not by a regular expression: every relist checks the UID of
// every container it reads back, and the expression was a tenth of an idle daemon's
// CPU time with 100 pods.
func plainUID(uid string) bool {
	for i := 0; i < len(uid); i++ {
		switch c := uid[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '.' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return uid != ""
}

// msgUID says what a UID may hold.
var msgUID = fmt.Sprintf("must be a plain token: a letter or digit, then letters, digits, '.' and '-', "+
	"at most %d characters in all (a UUID, as `kubectl get -o yaml` shows, fits); or leave it out and staticpod derives one", MaxUIDLength)

// CheckUID returns an error unless uid is a plain token (see plainUID): the one test
// of a UID before anything names a path, a cgroup or a CNI argument after it, whether
// the UID comes from a manifest or back from a runtime's records.
func CheckUID(uid types.UID) error {
	if len(uid) == 0 || len(uid) > MaxUIDLength || !plainUID(string(uid)) {
		return fmt.Errorf("uid %q %s", truncate(string(uid)), msgUID)
	}
	return nil
}

// validateUID checks a metadata.uid given in a manifest; an empty one is derived later
// (see Identify).
func validateUID(uid types.UID, fld *field.Path) field.ErrorList {
	if uid == "" || CheckUID(uid) == nil {
		return nil
	}
	if plainUID(string(uid)) {
		return field.ErrorList{field.TooLong(fld, "", MaxUIDLength)}
	}
	return field.ErrorList{field.Invalid(fld, truncate(string(uid)), msgUID)}
}

// truncate cuts a value quoted in an error to a readable length.
func truncate(s string) string {
	const n = 2 * MaxUIDLength
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// UIDTaken is the error of a pod refused because another pod has its UID already: two
// pods of one UID would share its directory, logs and cgroup, and removing either would
// remove the other's. holder names that pod and where it comes from (see Origin).
func UIDTaken(uid types.UID, holder string) *field.Error {
	e := field.Duplicate(field.NewPath("metadata", "uid"), string(uid))
	e.Detail = "already the UID of " + holder + ", which keeps it; this pod is ignored (give each pod its own metadata.uid, or none)"
	return e
}

// Origin names a pod and where it comes from, for a message: `pod kube-system/etcd-n
// from file /etc/kubernetes/manifests/etcd.yaml`.
func Origin(pod *corev1.Pod) string {
	where := pod.Annotations[AnnotationLocation]
	switch pod.Annotations[AnnotationSource] {
	case SourceFile:
		where = "file " + where
	case SourceHTTP:
		where = "URL " + where
	case SourceAPI:
		where = fmt.Sprintf("pushed manifest %q", where)
	}
	return "pod " + Key(pod) + " from " + where
}
