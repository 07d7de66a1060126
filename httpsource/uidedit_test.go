package httpsource

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A body whose pod gives its metadata.uid keeps that UID through an edit, as on the
// kubelet: the edit is still sent, with the new spec under the same UID; a body that
// changed only in a comment is not.
func TestURLSendsEditsOfAPodThatGivesItsUID(t *testing.T) {
	const uid = "5b9a2f0e-1c1d-4c8e-9a53-0e2c1b7d9f11"
	withUID := func(image string) string {
		return strings.Replace(pod("web", image), "metadata: {name: web}", "metadata: {name: web, uid: "+uid+"}", 1)
	}
	s := newSite(body(withUID("busybox:1"), "", ""))
	srv := httptest.NewServer(s)
	defer srv.Close()
	r := runSource(t, &URLSource{URL: srv.URL})
	if first := r.awaitUpdate(t, "start"); len(first.Pods) != 1 || first.Pods[0].UID != uid {
		t.Fatalf("first snapshot: %v, want web-node1 with uid %s", podNames(first), uid)
	}

	s.set(body("# a comment\n"+withUID("busybox:1"), "", ""))
	r.awaitFreshPoll(t)
	r.noUpdate(t, "a body with the same pod and a new comment")

	s.set(body(withUID("busybox:2"), "", ""))
	edited := r.awaitUpdate(t, "an edit of the image")
	if diff := cmp.Diff([]string{"busybox:2"}, images(edited)); diff != "" {
		t.Fatalf("images (-want +got):\n%s", diff)
	}
	if got := edited.Pods[0].UID; got != uid {
		t.Errorf("UID after the edit = %s, want the given %s", got, uid)
	}
}
