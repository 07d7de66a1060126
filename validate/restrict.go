package validate

import (
	"strings"

	"github.com/urfave/cli/v2"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/runner/restrict"
	"github.com/staticpod/staticpod/runner/sysctl"
)

// RestrictionFlags are the flags that say what pods of each source may ask for
// (restrict.Restrictions), shared by run, which refuses such pods, and validate, which
// reports them.
func RestrictionFlags() []cli.Flag {
	sources := func(flag, what string) cli.Flag {
		name := strings.TrimPrefix(flag, "--")
		return &cli.StringSliceFlag{
			Name: name, Value: cli.NewStringSlice(restrict.AllSources), EnvVars: spcli.Env(name),
			Usage: "sources (file, http, api, *) whose pods may " + what + " (repeatable or comma-separated)",
		}
	}
	return []cli.Flag{
		sources(restrict.FlagPrivilegedSources, "run privileged containers"),
		sources(restrict.FlagHostNetworkSources, "use the host's network"),
		sources(restrict.FlagHostPIDSources, "use the host's PID namespace"),
		sources(restrict.FlagHostIPCSources, "use the host's IPC namespace"),
		&cli.StringSliceFlag{
			Name: "allowed-host-paths", EnvVars: spcli.Env("allowed-host-paths"),
			Usage: "path prefixes under which hostPath volumes may lie, for pods of every source (repeatable; default: any path)",
		},
		spcli.AllowedUnsafeSysctlsFlag(),
	}
}

// Restrictions are the restrictions RestrictionFlags set, checked.
func Restrictions(c *cli.Context) (restrict.Restrictions, error) {
	r := restrict.Restrictions{
		PrivilegedSources:  c.StringSlice("privileged-sources"),
		HostNetworkSources: c.StringSlice("host-network-sources"),
		HostPIDSources:     c.StringSlice("host-pid-sources"),
		HostIPCSources:     c.StringSlice("host-ipc-sources"),
		Sysctls:            restrict.Sysctls{Kernel: sysctl.HostKernel(), AllowedUnsafe: spcli.AllowedUnsafeSysctls(c)},
	}
	if c.IsSet("allowed-host-paths") {
		r.AllowedHostPaths = append([]string{}, c.StringSlice("allowed-host-paths")...)
	}
	return r, r.Validate()
}
