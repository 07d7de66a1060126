package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersionPrintsTheCommitAndItsDateAsVersionFlagDoes builds staticpod as make build
// does and checks that `staticpod version` and `staticpod --version` both print the
// version, commit and commit date given to the build, Go's version, the platform and the
// containerd client.
func TestVersionPrintsTheCommitAndItsDateAsVersionFlagDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds staticpod")
	}
	bin := filepath.Join(t.TempDir(), "staticpod")
	build := exec.Command("./hack/build.sh", bin)
	build.Env = append(os.Environ(), "VERSION=v9.9.9", "COMMIT=0123456789abcdef", "DATE=2026-05-06T07:08:09Z")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("hack/build.sh: %v\n%s", err, out)
	}
	var outs []string
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("staticpod %s: %v", arg, err)
		}
		outs = append(outs, string(out))
	}
	for _, want := range []string{"staticpod v9.9.9\n", "commit: 0123456789abcdef\n", "date: 2026-05-06T07:08:09Z\n",
		"go: " + runtime.Version() + "\n", "platform: linux/" + runtime.GOARCH + "\n", "containerd client: v2."} {
		if !strings.Contains(outs[0], want) {
			t.Errorf("staticpod version printed\n%s\nwithout %q", outs[0], want)
		}
	}
	if outs[0] != outs[1] {
		t.Errorf("staticpod --version printed\n%s\nstaticpod version\n%s", outs[1], outs[0])
	}
}
