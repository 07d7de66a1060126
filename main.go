// Command staticpod runs Kubernetes Pod manifests from a directory and from a URL on one
// machine, with no apiserver, on containerd.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/staticpod/staticpod/internal/pause"
)

// version is set at build time: go build -ldflags "-X main.version=v0.1.0".
var version = "dev"

// Exit codes shared by the commands.
const (
	exitInvalid = 1 // the input is wrong (an invalid manifest), or the work failed
	exitUsage   = 2 // the command line is wrong, or the command cannot run here
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "staticpod:", err)
		os.Exit(exitInvalid)
	}
}

func newApp() *cli.App {
	app := &cli.App{
		Name:         "staticpod",
		Usage:        "run Kubernetes static pods on containerd, without an apiserver",
		Version:      version,
		OnUsageError: usageError,
		Commands: []*cli.Command{
			runCommand(),
			onceCommand(),
			validateCommand(),
			psCommand(),
			logsCommand(),
			describeCommand(),
			execCommand(),
			versionCommand(),
			{
				Name:   "pause",
				Usage:  "hold a pod's namespaces (the sandbox process; run by staticpod itself)",
				Hidden: true,
				Action: func(*cli.Context) error { return pause.Run() },
			},
			loggerCommand(),
		},
	}
	for _, c := range app.Commands {
		c.OnUsageError = usageError
	}
	return app
}

// usageError makes a wrong command line exit 2, as scripts expect of a CLI.
func usageError(c *cli.Context, err error, _ bool) error {
	return cli.Exit(fmt.Sprintf("%v (see 'staticpod %s --help')", err, c.Command.Name), exitUsage)
}
