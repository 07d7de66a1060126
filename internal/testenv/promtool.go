package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// Promtool returns the path of Prometheus's promtool, which make test takes out of
// Debian's prometheus package into .cache/bin (hack/deps.sh test). Without it the test
// is skipped, except under CI=true, where it fails.
func Promtool(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool not found (CI=true): run make test, which takes it out of Debian's prometheus package (hack/deps.sh test): %v", err)
		}
		t.Skipf("promtool not found; make test takes it out of Debian's prometheus package (hack/deps.sh test): %v", err)
	}
	return path
}

// PromtoolCheckMetrics runs promtool check metrics on an exposition (see Promtool).
func PromtoolCheckMetrics(t testing.TB, exposition []byte) {
	t.Helper()
	cmd := exec.Command(Promtool(t), "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\non:\n%s", err, out, exposition)
	}
}
