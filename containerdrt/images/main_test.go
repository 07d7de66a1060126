package images

import (
	"os"
	"testing"

	"github.com/staticpod/staticpod/internal/testenv"
)

// ctd is the containerd every integration test of this package shares.
var ctd testenv.Shared

func TestMain(m *testing.M) {
	os.Exit(ctd.Main(m))
}
