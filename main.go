// Command staticpod runs Kubernetes Pod manifests from a directory, a URL and pushes
// through its API on one machine, with no apiserver, on containerd.
//
// This package only wires: the urfave/cli app with the commands of packages cli, once
// and validate, and staticpod run, whose parts (runtime, runner, sources, API, and
// internal/dirlock, internal/diskspace, internal/service, internal/nodeshutdown) live
// in packages of their own. Flag defaults are the constants of the packages that own
// the settings. deps_test.go holds every package of the module to its import rules.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/internal/buildinfo"
	"github.com/staticpod/staticpod/internal/pause"
	"github.com/staticpod/staticpod/once"
	"github.com/staticpod/staticpod/validate"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "staticpod:", err)
		os.Exit(spcli.ExitInvalid)
	}
}

func newApp() *cli.App {
	cli.VersionPrinter = printVersion
	app := &cli.App{
		Name:         "staticpod",
		Usage:        "run Kubernetes static pods on containerd, without an apiserver",
		Version:      buildinfo.Version,
		OnUsageError: spcli.UsageError,
		// --generate-bash-completion, which the scripts of staticpod completion call.
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			runCommand(),
			once.Command(),
			validate.Command(),
			spcli.PS(),
			spcli.Images(),
			spcli.Top(),
			spcli.Logs(),
			spcli.Describe(),
			spcli.Exec(),
			spcli.Wait(),
			versionCommand(),
			spcli.Completion(),
			spcli.Man(),
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
		c.OnUsageError = spcli.UsageError
	}
	return app
}
