package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version of staticpod and of what it is built with",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "staticpod %s\ngo %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			if v := moduleVersion("github.com/containerd/containerd/v2"); v != "" {
				fmt.Fprintf(c.App.Writer, "containerd client %s\n", v)
			}
			return nil
		},
	}
}

// moduleVersion is the version of a module compiled into this binary, or "".
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range info.Deps {
		if m.Path == path {
			return m.Version
		}
	}
	return ""
}
