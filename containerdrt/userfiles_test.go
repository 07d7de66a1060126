package containerdrt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticpod/staticpod/internal/testenv"
)

// The containers of an image run as its USER and with its groups, and a runAsUser gets
// its group from the image's /etc/passwd, whether looked up in their snapshots (while
// the image's user files are copied) or in the copy under the run dir.
func TestContainersRunAsTheImageSaysThroughItsUserFiles(t *testing.T) {
	r := newTestRuntime(t)
	const ref = "example.com/users:staticpod-test"
	ctd.Daemon(t).MustImportImage(t, r.cfg.Namespace, testenv.ImageOptions{Ref: ref, User: "app", Files: map[string]testenv.File{
		"etc/passwd": {Content: []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/:/bin/sh\n")},
		"etc/group":  {Content: []byte("root:x:0:\nwheel:x:10:app\naudio:x:29:app\napp:x:1001:\n")},
	}})
	// The first pod's containers start the copy; the second's use it.
	for _, name := range []string{"first", "second"} {
		pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+"}\nspec:\n  hostNetwork: true\n  containers:\n"+
			"  - {name: image-user, image: "+ref+", imagePullPolicy: Never, command: [sleep, \"3600\"]}\n"+
			"  - {name: run-as, image: "+ref+", imagePullPolicy: Never, command: [sleep, \"3600\"], securityContext: {runAsUser: 1000}}\n")
		cs := r.mustRunPod(t, pod)
		for c, want := range map[string]string{"image-user": "1000 1001 10 29 1001", "run-as": "1000 1001 10 29 1001"} {
			got := strings.Join(strings.Fields(r.execOut(t, cs[c].ID, "sh", "-c", `echo $(id -u) $(id -g) $(id -G | tr ' ' '\n' | sort -n)`)), " ")
			if got != want {
				t.Errorf("%s/%s: uid gid groups = %q, want %q", name, c, got, want)
			}
		}
		r.images.Wait() // the copy is made
	}
	copies, err := os.ReadDir(filepath.Join(r.Runtime.cfg.RunDir, userFilesDir))
	if err != nil || len(copies) != 1 {
		t.Fatalf("copies of user files: %v, %v; want one, of the one image", copies, err)
	}
	if b, err := os.ReadFile(filepath.Join(r.Runtime.cfg.RunDir, userFilesDir, copies[0].Name(), "etc/group")); err != nil || !strings.Contains(string(b), "audio:x:29:app") {
		t.Errorf("copied etc/group = %q, %v", b, err)
	}
}
