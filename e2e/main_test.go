package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/staticpod/staticpod/internal/testenv"
)

// ctd is the containerd the end-to-end tests share; each test has its own namespace.
var ctd testenv.Shared

var (
	// root is the module's root: the tests run in their package's directory, e2e.
	root string
	// binary is staticpod built once for the tests of this package, by hack/build.sh.
	binary string
)

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

// buildAndRun builds the binary, runs the tests and removes the binary again.
func buildAndRun(m *testing.M) int {
	var err error
	if root, err = filepath.Abs(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "staticpod-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "staticpod")
	// As make build does: with the helper program it installs to run as log writer and
	// sandbox.
	build := exec.Command(filepath.Join(root, "hack", "build.sh"), binary)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build staticpod: %v\n%s", err, out)
		return 1
	}
	return ctd.Main(m)
}

// runStaticpod runs the binary in the module's root, where the paths of testdata and
// examples are short, and returns its combined output and exit code.
func runStaticpod(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("run staticpod %v: %v", args, err)
	}
	return out.String(), 0
}
