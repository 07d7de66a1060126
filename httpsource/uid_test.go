package httpsource

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

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
	p.Holder = func(uid types.UID) (*corev1.Pod, error) {
		if uid != reusedUID {
			return nil, nil
		}
		return filePod, nil
	}
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

// Until the runner can tell who has a UID (staticpod is starting: a source or the
// runtime not read yet) a push is refused with ErrStarting and nothing is stored; once
// it can, a push is refused when its UID is of a pod that runs, also one whose
// source no longer wants it, or of a pod of a removed manifest not gone yet; the
// manifest pushed again under its own name keeps its UID.
func TestPutRefusesAUIDHeldInTheRuntime(t *testing.T) {
	p, err := NewPush(t.TempDir(), "node1", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	running := func(source, location, name string) *corev1.Pod {
		pod := &corev1.Pod{}
		pod.UID, pod.Name, pod.Namespace = reusedUID, name, "default"
		pod.Annotations = map[string]string{manifests.AnnotationSource: source, manifests.AnnotationLocation: location}
		return pod
	}
	for _, tc := range []struct {
		name   string
		holder *corev1.Pod
		err    error
		want   string // "" stored; else the error at metadata.uid, or "starting"
	}{
		{"sources not read yet", nil, errors.New("sources not all read yet (file)"), "starting"},
		{"a file pod runs under the UID", running("file", "/etc/kubernetes/manifests/etcd.yaml", "etcd-node1"), nil,
			"pod default/etcd-node1 from file /etc/kubernetes/manifests/etcd.yaml"},
		{"a removed push's pod still runs", running("api", "gone", "gone-node1"), nil, `pod default/gone-node1 from pushed manifest "gone"`},
		{"a file pod of an older staticpod, location not recorded", running("file", "", "second-node1"), nil, "pod default/second-node1 from file"},
		{"the same manifest runs", running("api", "second", "second-node1"), nil, ""},
		{"the same pod runs, location not recorded", running("api", "", "second-node1"), nil, ""},
		{"nothing has the UID", nil, nil, ""},
	} {
		p.Holder = func(types.UID) (*corev1.Pod, error) { return tc.holder, tc.err }
		res, err := p.Put("second", uidManifest("second"))
		stored := len(p.List()) == 1
		switch tc.want {
		case "starting":
			if !errors.Is(err, ErrStarting) || !strings.Contains(err.Error(), "sources not all read yet (file)") || stored {
				t.Errorf("%s: Put = %v, %v, stored %v; want ErrStarting saying why, nothing stored", tc.name, res.Errors, err, stored)
			}
		case "":
			if err != nil || len(res.Errors) > 0 || !stored {
				t.Errorf("%s: Put = %v, %v, stored %v; want it stored", tc.name, res.Errors, err, stored)
			}
		default:
			if err != nil || len(res.Errors) != 1 || res.Errors[0].Field() != "metadata.uid" || !strings.Contains(res.Errors[0].Error(), tc.want) || stored {
				t.Errorf("%s: Put = %v, %v, stored %v; want one error at metadata.uid naming %s, nothing stored", tc.name, res.Errors, err, stored, tc.want)
			}
		}
		if stored {
			if err := p.Delete("second"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A push made while staticpod starts waits until the holders of UIDs are known
// (HolderKnown), then is decided as any push; one that waits longer than startWait is
// refused with ErrStarting, saying why, and nothing is stored.
func TestPutWaitsUntilUIDHoldersAreKnown(t *testing.T) {
	p, err := NewPush(t.TempDir(), "node1", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	known := make(chan struct{})
	p.HolderKnown = known
	p.Holder = func(types.UID) (*corev1.Pod, error) {
		select {
		case <-known:
			return nil, nil
		default:
			return nil, errors.New("sources not all read yet (file)")
		}
	}
	p.startWait = time.Millisecond
	if _, err := p.Put("early", uidManifest("early")); !errors.Is(err, ErrStarting) || !strings.Contains(err.Error(), "sources not all read yet (file)") || len(p.List()) != 0 {
		t.Errorf("Put before the holders are known, past its wait = %v, stored %v; want ErrStarting saying why, nothing stored", err, p.List())
	}

	p.startWait = time.Hour
	done := make(chan error, 1)
	go func() {
		res, err := p.Put("waited", uidManifest("waited"))
		if err == nil && len(res.Errors) > 0 {
			err = fmt.Errorf("%v", res.Errors)
		}
		done <- err
	}()
	close(known)
	if err := <-done; err != nil || len(p.List()) != 1 {
		t.Errorf("Put waiting for the holders = %v, stored %v; want it stored once they are known", err, p.List())
	}
}
