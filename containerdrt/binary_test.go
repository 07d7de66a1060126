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
	testBinaryPath string // the helper program built for these tests
	testBinaryErr  error
)

// testBinary builds, once per test run, the program a Runtime runs as each container's
// log writer and as the sandbox process, Config.Self: staticpod-helper, as
// hack/build.sh builds it for the staticpod binary to carry (static, since the sandbox
// runs it in a root that holds nothing else). It returns its path; TestMain removes it
// after the package's tests.
func testBinary(t testing.TB) string {
	t.Helper()
	testBinaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "staticpod-test-bin-")
		if err != nil {
			testBinaryErr = err
			return
		}
		testBinaryPath = filepath.Join(dir, "staticpod-helper")
		cmd := exec.Command("../hack/build.sh", "--helper", testBinaryPath)
		if out, err := cmd.CombinedOutput(); err != nil {
			testBinaryErr = fmt.Errorf("build staticpod-helper: %v\n%s", err, out)
		}
	})
	if testBinaryErr != nil {
		t.Fatal(testBinaryErr)
	}
	return testBinaryPath
}

// removeTestBinary deletes the program testBinary built, if any.
func removeTestBinary() {
	if testBinaryPath != "" {
		os.RemoveAll(filepath.Dir(testBinaryPath))
	}
}
