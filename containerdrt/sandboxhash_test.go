package containerdrt

import (
	"testing"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// A sandbox records the hash of the pod fields it is made from, pinned namespaces and
// sandbox processes alike, and List reads it back: the runner tells by it, after a
// restart too, whether an edit of the pod needs a new sandbox.
func TestSandboxRecordsTheHashOfItsPodFields(t *testing.T) {
	r := newTestRuntime(t)
	for _, tt := range []struct{ name, spec string }{
		{"pinned", "  hostname: one\n"},
		{"process", "  shareProcessNamespace: true\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+tt.name+"}\nspec:\n"+tt.spec+
				"  containers:\n  - {name: c, image: "+testImage+", command: [\"true\"]}\n")
			sb, err := r.startSandbox(pod, 0, manifests.Objects{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.mustRemove(t, sb.ID) })
			want := manifests.SandboxHash(pod)
			if sb.Hash != want {
				t.Errorf("StartSandbox: hash %q, want %q", sb.Hash, want)
			}
			listed := false
			for _, c := range r.listAll(t) {
				if c.ID != sb.ID {
					continue
				}
				listed = true
				if c.Kind != runner.KindSandbox || c.Hash != want {
					t.Errorf("List: %s %s with hash %q, want a sandbox with %q", c.ID, c.Kind, c.Hash, want)
				}
			}
			if !listed {
				t.Errorf("List does not show sandbox %s", sb.ID)
			}
		})
	}
}
