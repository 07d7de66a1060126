package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func identityPod() *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
	}
	Default(pod)
	return pod
}

// TestUIDPinned pins the UID scheme. If this test fails, the UID of every static pod
// changed and every running pod would be restarted by an upgrade: do not update the
// expected values; add a new scheme instead.
func TestUIDPinned(t *testing.T) {
	tests := []struct {
		node string
		src  Source
		want types.UID
	}{
		{"node1", Source{Kind: SourceFile, Location: "/etc/kubernetes/manifests/web.yaml"}, "2cc5cb6cba33d482e63037b663799c17"},
		{"node2", Source{Kind: SourceFile, Location: "/etc/kubernetes/manifests/web.yaml"}, "ce38214699790d1ec8178266f2631001"},
		{"node1", Source{Kind: SourceHTTP, Location: "http://config/pods"}, "1fa73a08b3edea28a97770225c11b0bb"},
		{"node2", Source{Kind: SourceHTTP, Location: "http://config/pods"}, "1fa73a08b3edea28a97770225c11b0bb"},
		// A URL shown with its query redacted hashes the URL as written (its Key).
		{"node1", Source{Kind: SourceHTTP, Location: "http://config/pods?t=REDACTED", Key: "http://config/pods"}, "1fa73a08b3edea28a97770225c11b0bb"},
	}
	for _, tt := range tests {
		if got := UID(identityPod(), tt.node, tt.src); got != tt.want {
			t.Errorf("UID(web, %s, %s) = %q, want %q", tt.node, tt.src, got, tt.want)
		}
	}
}

func TestUIDChangesWithContent(t *testing.T) {
	src := Source{Kind: SourceFile, Location: "/m/web.yaml"}
	a, b := identityPod(), identityPod()
	b.Spec.Containers[0].Image = "busybox:1.37"
	if UID(a, "n", src) == UID(b, "n", src) {
		t.Error("UID did not change when the image changed")
	}
	if UID(a, "n", src) != UID(identityPod(), "n", src) {
		t.Error("UID differs for equal pods")
	}
	if UID(a, "n", src) == UID(a, "n", Source{Kind: SourceFile, Location: "/m/other.yaml"}) {
		t.Error("UID did not change with the file path")
	}
}

func TestIdentify(t *testing.T) {
	pod := identityPod()
	uid := UID(pod, "Node-A", Source{Kind: SourceFile, Location: "/m/web.yaml"})
	Identify(pod, "Node-A", Source{Kind: SourceFile, Location: "/m/web.yaml"})
	if pod.Name != "web-node-a" {
		t.Errorf("name = %q, want web-node-a", pod.Name)
	}
	if pod.UID != uid || pod.Annotations[AnnotationHash] != string(uid) {
		t.Errorf("uid = %q, hash annotation = %q, want %q", pod.UID, pod.Annotations[AnnotationHash], uid)
	}
	if pod.Spec.NodeName != "Node-A" || pod.Annotations[AnnotationSource] != SourceFile || pod.Annotations[AnnotationLocation] != "/m/web.yaml" {
		t.Errorf("nodeName %q, annotations %v", pod.Spec.NodeName, pod.Annotations)
	}
	if len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0].Effect != corev1.TaintEffectNoExecute {
		t.Errorf("tolerations = %v, want the NoExecute toleration of file pods", pod.Spec.Tolerations)
	}

	given := identityPod()
	given.UID = "fixed"
	Identify(given, "n", Source{Kind: SourceHTTP, Location: "http://x"})
	if given.UID != "fixed" || len(given.Spec.Tolerations) != 0 {
		t.Errorf("uid = %q, tolerations %v: want the manifest's uid kept and no toleration for http pods", given.UID, given.Spec.Tolerations)
	}
}

func TestContainerHash(t *testing.T) {
	a := identityPod().Spec.Containers[0]
	b := a
	b.Args = []string{"x"}
	if ContainerHash(&a) == ContainerHash(&b) {
		t.Error("ContainerHash did not change with args")
	}
	// Pinned like the UID: a change here would make adoption replace every container.
	const want = "a9e01573d76b78cd"
	if got := ContainerHash(&a); got != want {
		t.Errorf("ContainerHash = %q, want %q", got, want)
	}
}
