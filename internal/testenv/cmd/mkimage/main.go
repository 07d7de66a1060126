// Command mkimage writes the busybox test image as an OCI image layout archive:
//
//	go run ./internal/testenv/cmd/mkimage -ref docker.io/library/busybox:staticpod -o busybox.tar
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/staticpod/staticpod/internal/testenv"
)

func main() {
	ref := flag.String("ref", "docker.io/library/busybox:staticpod", "image reference recorded in the archive")
	out := flag.String("o", "busybox.tar", "archive to write")
	busybox := flag.String("busybox", "", "static busybox to copy (default $STATICPOD_TEST_BUSYBOX or "+testenv.DefaultBusybox+")")
	flag.Parse()
	if err := testenv.WriteImageArchive(*out, testenv.ImageOptions{Ref: *ref, Busybox: *busybox}); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}
