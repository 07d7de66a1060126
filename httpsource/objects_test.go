package httpsource

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/staticpod/staticpod/manifests"
)

const (
	readerPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: c\n    image: busybox\n" +
		"    env: [{name: MODE, valueFrom: {configMapKeyRef: {name: web, key: mode}}}]\n"
	webConfig = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {mode: fast}\n"
	webRef    = "spec.containers[0].env[0].valueFrom.configMapKeyRef.name"
)

var webConfigRef = manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: "default", Name: "web"}

// TestPushObjects: a pushed pod may read the ConfigMap of another pushed manifest; one
// that reads what no pushed manifest holds is refused at its field; the snapshot carries
// the objects.
func TestPushObjects(t *testing.T) {
	ps, _ := mustRunPush(t, t.TempDir())
	res, err := ps.Put("web", []byte(readerPod))
	if err != nil || len(res.Errors) != 1 || res.Errors[0].Field() != webRef {
		t.Fatalf("Put of a pod reading a missing ConfigMap = %v, %v; want it refused at %s", res.Errors, err, webRef)
	}
	ps.awaitUpdate(t, "a refused push") // tells the refusal
	ps.mustPut(t, "config", webConfig)
	if u := ps.awaitUpdate(t, "the ConfigMap"); !u.Objects.Has(webConfigRef) {
		t.Fatalf("snapshot after the ConfigMap's push lacks it: %+v", u.Objects)
	}
	if list := ps.List(); len(list) != 1 || len(list[0].Objects) != 1 || list[0].Objects[0] != "ConfigMap default/web" {
		t.Errorf("List = %+v, want manifest config with ConfigMap default/web", list)
	}
	ps.mustPut(t, "web", readerPod)
	if u := ps.awaitUpdate(t, "the pod"); len(u.Pods) != 1 || !u.Objects.Has(webConfigRef) {
		t.Fatalf("snapshot after the pod's push: %v, objects %+v", podNames(u), u.Objects)
	}
	res, err = ps.Put("other", []byte(webConfig))
	if err != nil || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "ConfigMap default/web is already defined by another pushed manifest") {
		t.Errorf("Put of a ConfigMap another manifest holds = %v, %v; want a conflict", res.Errors, err)
	}
}

// TestURLObjects: the body's pods read the body's objects, and a body whose pod reads
// what it does not hold is a failure that keeps the last good snapshot.
func TestURLObjects(t *testing.T) {
	s := newSite(body(webConfig+"---\n"+readerPod, "", ""))
	srv := httptest.NewServer(s)
	defer srv.Close()
	r := runSource(t, &URLSource{URL: srv.URL})
	first := r.awaitUpdate(t, "start")
	if len(first.Pods) != 1 || !first.Objects.Has(webConfigRef) {
		t.Fatalf("first snapshot: %v, objects %+v", podNames(first), first.Objects)
	}
	s.set(body(strings.Replace(webConfig, "fast", "slow", 1)+"---\n"+readerPod, "", ""))
	edited := r.awaitUpdate(t, "an edit of the ConfigMap alone")
	if data, _ := edited.Objects.Data(webConfigRef); string(data["mode"]) != "slow" || edited.Pods[0].UID != first.Pods[0].UID {
		t.Errorf("after the edit: mode %q, same pod %v; want slow and the same pod", data["mode"], edited.Pods[0].UID == first.Pods[0].UID)
	}
	s.set(body(readerPod, "", ""))
	r.awaitFreshPoll(t)
	r.noUpdate(t, "a body without the ConfigMap")
	if errs := r.errs.get(); len(errs) != 1 || !strings.Contains(errs[0].Error(), webRef+`: Not found: "web"`) {
		t.Errorf("failures after the ConfigMap went = %v, want one locating the reference", errs)
	}
}
