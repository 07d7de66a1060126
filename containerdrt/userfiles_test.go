package containerdrt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticpod/staticpod/internal/testenv"
)

// The containers of an image run as its USER and with its groups, and a runAsUser gets
// its group from the image's /etc/passwd, looked up in the copy of the image's user
// files under the run dir rather than in each container's snapshot.
func TestContainersRunAsTheImageSaysThroughItsUserFiles(t *testing.T) {
	r := newTestRuntime(t)
	const ref = "example.com/users:staticpod-test"
	ctd.Daemon(t).MustImportImage(t, r.cfg.Namespace, testenv.ImageOptions{Ref: ref, User: "app", Files: map[string]testenv.File{
		"etc/passwd": {Content: []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/:/bin/sh\n")},
		"etc/group":  {Content: []byte("root:x:0:\nwheel:x:10:app\naudio:x:29:app\napp:x:1001:\n")},
	}})
	pod := loadPod(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: users}\nspec:\n  hostNetwork: true\n  containers:\n"+
		"  - {name: image-user, image: "+ref+", imagePullPolicy: Never, command: [sleep, \"3600\"]}\n"+
		"  - {name: run-as, image: "+ref+", imagePullPolicy: Never, command: [sleep, \"3600\"], securityContext: {runAsUser: 1000}}\n")
	cs := r.mustRunPod(t, pod)
	for name, want := range map[string]string{"image-user": "1000 1001 10 29 1001", "run-as": "1000 1001 10 29 1001"} {
		got := strings.Join(strings.Fields(r.execOut(t, cs[name].ID, "sh", "-c", `echo $(id -u) $(id -g) $(id -G | tr ' ' '\n' | sort -n)`)), " ")
		if got != want {
			t.Errorf("%s: uid gid groups = %q, want %q", name, got, want)
		}
	}
	copies, err := os.ReadDir(filepath.Join(r.Runtime.cfg.RunDir, userFilesDir))
	if err != nil || len(copies) != 1 {
		t.Fatalf("copies of user files: %v, %v; want one, of the one image", copies, err)
	}
	if b, err := os.ReadFile(filepath.Join(r.Runtime.cfg.RunDir, userFilesDir, copies[0].Name(), "etc/group")); err != nil || !strings.Contains(string(b), "audio:x:29:app") {
		t.Errorf("copied etc/group = %q, %v", b, err)
	}
}
