package containerdrt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	testBinaryOnce sync.Once
	testBinaryPath string // the staticpod binary built for these tests
	testBinaryErr  error
)

// testBinary builds the staticpod binary once per test run, statically (it runs as the
// sandbox process inside a root that holds nothing else, and as the log writer), and
// returns its path. TestMain removes it after the package's tests.
func testBinary(t testing.TB) string {
	t.Helper()
	testBinaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "staticpod-test-bin-")
		if err != nil {
			testBinaryErr = err
			return
		}
		testBinaryPath = filepath.Join(dir, "staticpod")
		cmd := exec.Command("go", "build", "-o", testBinaryPath, "..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			testBinaryErr = fmt.Errorf("build staticpod: %v\n%s", err, out)
		}
	})
	if testBinaryErr != nil {
		t.Fatal(testBinaryErr)
	}
	return testBinaryPath
}

// removeTestBinary deletes the binary testBinary built, if any.
func removeTestBinary() {
	if testBinaryPath != "" {
		os.RemoveAll(filepath.Dir(testBinaryPath))
	}
}
