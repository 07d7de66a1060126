package main

import (
	"github.com/urfave/cli/v2"

	"github.com/staticpod/staticpod/internal/buildinfo"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, commit and date of staticpod's build, and what it is built with",
		Action: func(c *cli.Context) error {
			return buildinfo.Get().Write(c.App.Writer)
		},
	}
}

// printVersion is --version's printer: the same as staticpod version.
func printVersion(c *cli.Context) {
	_ = buildinfo.Get().Write(c.App.Writer)
}
