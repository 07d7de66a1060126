package containerdrt

import (
	"fmt"
	"os"
	"testing"

	"github.com/staticpod/staticpod/internal/testenv"
)

// ctd is the containerd every integration test of this package shares.
var ctd testenv.Shared

func TestMain(m *testing.M) {
	if raw := os.Getenv(logCreatorEnv); raw != "" { // a helper process, not a test run
		if err := runLogCreator(raw); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if socket := os.Getenv(silentShimEnv); socket != "" { // a helper process, not a test run
		runSilentShim(socket)
	}
	if socket := os.Getenv(fakeShimEnv); socket != "" { // a helper process, not a test run
		runFakeShim(socket, os.Getenv(fakeShimSwapEnv))
	}
	code := ctd.Main(m)
	removeTestBinary()
	os.Exit(code)
}
