package httpsource

import (
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

const reusedUID = "3f5b3a0e-8a3c-4f57-9d7e-2b8e0c1d9a11"

func uidManifest(name string) []byte {
	return []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", uid: " + reusedUID + "}\nspec: {containers: [{name: c, image: busybox:1.36}]}\n")
}

// A push whose pod takes the UID of a pod that another stored manifest, or another
// source, has is refused, naming the holder; nothing is stored.
func TestPutRefusesATakenUID(t *testing.T) {
	p, err := NewPush(t.TempDir(), "node1", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Put("first", uidManifest("first")); err != nil || len(res.Errors) > 0 {
		t.Fatalf("Put(first) = %v, %v", res.Errors, err)
	}
	if res, err := p.Put("first", uidManifest("first")); err != nil || len(res.Errors) > 0 {
		t.Fatalf("Put(first) again = %v, %v; a manifest keeps its own UID", res.Errors, err)
	}
	res, err := p.Put("second", uidManifest("second"))
	if err != nil || len(res.Errors) != 1 || res.Errors[0].Field() != "metadata.uid" || !strings.Contains(res.Errors[0].Error(), `pushed manifest "first"`) {
		t.Errorf("Put(second) = %v, %v; want one error at metadata.uid naming pushed manifest first", res.Errors, err)
	}

	filePod := &corev1.Pod{}
	filePod.Name, filePod.Namespace = "etcd-node1", "kube-system"
	filePod.Annotations = map[string]string{manifests.AnnotationSource: manifests.SourceFile, manifests.AnnotationLocation: "/etc/kubernetes/manifests/etcd.yaml"}
	p.Holder = func(uid types.UID) (*corev1.Pod, bool) { return filePod, uid == reusedUID }
	if err := p.Delete("first"); err != nil {
		t.Fatal(err)
	}
	res, err = p.Put("third", uidManifest("third"))
	want := "pod kube-system/etcd-node1 from file /etc/kubernetes/manifests/etcd.yaml"
	if err != nil || len(res.Errors) != 1 || res.Errors[0].Field() != "metadata.uid" || !strings.Contains(res.Errors[0].Error(), want) {
		t.Errorf("Put(third) = %v, %v; want one error at metadata.uid naming %s", res.Errors, err, want)
	}
	if got := p.List(); len(got) != 0 {
		t.Errorf("stored %v, want nothing", got)
	}
}
