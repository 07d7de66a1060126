package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/logs"
)

// loggerCommand is the logger that containerd's shim starts for each container, through
// the binary:// log URI that containerdrt gives its tasks; logs.RunShimLogger is its body.
func loggerCommand() *cli.Command {
	return &cli.Command{
		Name:      logs.Command,
		Usage:     "write a container's output as CRI log files (containerd binary log driver)",
		ArgsUsage: "CONFIG",
		Description: "CONFIG is a URL query: path=FILE, and optionally symlink=LINK, max-size=BYTES,\n" +
			"max-files=N, max-line-size=BYTES. containerd's shim runs it with the container's\n" +
			"stdout and stderr on descriptors 3 and 4 and a readiness pipe on 5.",
		Hidden: true,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit(fmt.Sprintf("logger: want one CONFIG argument, got %d", c.NArg()), spcli.ExitUsage)
			}
			cfg, err := logs.ParseConfig(c.Args().First())
			if err != nil {
				return cli.Exit(fmt.Sprintf("logger: %v", err), spcli.ExitUsage)
			}
			if err := logs.RunShimLogger(cfg); err != nil {
				return fmt.Errorf("logger for container %s: %w", os.Getenv("CONTAINER_ID"), err)
			}
			return nil
		},
	}
}
