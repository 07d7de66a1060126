// Package cli holds the operator's commands of staticpod that talk to the daemon — ps,
// images, logs, describe, exec and wait — one file each, with the printers they share,
// the handling of their arguments (pod references, flags after POD) and the exit codes
// every command of the binary uses. main appends the commands to its urfave/cli app (PS,
// Images, Logs, Describe, Exec, Wait).
//
// The commands talk to the daemon only, through the api/client package, exec included:
// cli must not link containerd, the runner or Prometheus.
//
// It also lends the other commands (run, once, validate) what they share with these,
// not yet moved to where it belongs: the STATICPOD_* environment names (Env), the node
// name flag and NodeName, the daemon's default root dir and containerd address and
// AbsoluteDirs for its directories, the table printer and the status words (NewTable, DisplayName, TerminatedReason,
// ConditionTrue, Count).
package cli

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/staticpod/staticpod/api/client"
)

// Defaults of the daemon that run and once share.
const (
	DefaultContainerdAddress = "/run/containerd/containerd.sock"
	DefaultRootDir           = "/var/lib/staticpod"
	DefaultRunDir            = "/run/staticpod"
)

// RunDir is the run dir of a daemon (containerdrt.Config.RunDir): runDir if given,
// else DefaultRunDir with the default root dir, else <root>/run, so that two daemons
// with root dirs of their own never share one.
func RunDir(runDir, root string) string {
	switch {
	case runDir != "":
		return runDir
	case filepath.Clean(root) == DefaultRootDir:
		return DefaultRunDir
	}
	return filepath.Join(root, "run")
}

// AbsoluteDirs makes the directories of flags names that c was given relative absolute,
// from the working directory. The daemon's directories end up in what containerd, its
// shims and runc read from working directories of their own (a pod's mounts and pinned
// namespaces, the log writer's path, the helper program under the root dir), where a
// relative path fails or, worse, names another file.
func AbsoluteDirs(c *cli.Context, names ...string) error {
	for _, name := range names {
		dir := c.String(name)
		if dir == "" || filepath.IsAbs(dir) {
			continue
		}
		abs, err := filepath.Abs(dir)
		if err == nil {
			err = c.Set(name, abs)
		}
		if err != nil {
			return fmt.Errorf("--%s %s: %w", name, dir, err)
		}
	}
	return nil
}

// Env is the environment variable that sets a flag: STATICPOD_<FLAG>, upper case with
// underscores, e.g. STATICPOD_POD_MANIFEST_PATH.
func Env(flag string) []string {
	return []string{"STATICPOD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))}
}

// NodeNameFlag is shared by every command that computes static pod names.
func NodeNameFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "hostname-override",
		Usage:   "node name that static pod names are suffixed with (default: the host name)",
		EnvVars: Env("hostname-override"),
	}
}

// AllowedUnsafeSysctlsFlag is the kubelet's --allowed-unsafe-sysctls, shared by run,
// once and validate: the sysctls pods may set besides the safe ones.
func AllowedUnsafeSysctlsFlag() cli.Flag {
	return &cli.StringSliceFlag{
		Name:    "allowed-unsafe-sysctls",
		EnvVars: Env("allowed-unsafe-sysctls"),
		Usage: "sysctls pods may set besides the safe ones: names, or prefixes ending in * (kernel.msg*, net.core.*), " +
			"of the IPC or network namespace (repeatable or comma-separated)",
	}
}

// AllowedUnsafeSysctls is the value of AllowedUnsafeSysctlsFlag.
func AllowedUnsafeSysctls(c *cli.Context) []string { return c.StringSlice("allowed-unsafe-sysctls") }

// NodeName is the node name static pods are named after: --hostname-override, else the
// host name, lower-cased as the kubelet does.
func NodeName(c *cli.Context) (string, error) {
	name := c.String("hostname-override")
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", err
		}
		name = h
	}
	return strings.ToLower(strings.TrimSpace(name)), nil
}

// clientFlags are the flags of every command that talks to the daemon's API.
func clientFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "api-socket", Value: client.DefaultSocket, Usage: "unix socket of the daemon's API", EnvVars: Env("api-socket")},
		&cli.StringFlag{Name: "server", Usage: "`URL` of the daemon's TCP API (staticpod run --listen), https://host:port or http://host:port, instead of the socket", EnvVars: Env("server")},
		&cli.StringFlag{Name: "token-file", Usage: "file holding the bearer token of the TCP API", EnvVars: Env("token-file")},
		&cli.StringFlag{Name: "certificate-authority", Usage: "PEM `FILE` of the CA that signed the daemon's certificate, trusted instead of the system's CAs (https:// only)", EnvVars: Env("certificate-authority")},
		&cli.BoolFlag{Name: "insecure-skip-tls-verify", Usage: "trust any certificate of the daemon (https:// only): the token goes to whoever answers", EnvVars: Env("insecure-skip-tls-verify")},
	}
}

// newClient returns a client of the API the command's clientFlags name. A token sent
// over plain http to another machine is sent, as kubectl sends it, with a warning.
func newClient(c *cli.Context) (*client.Client, error) {
	server := c.String("server")
	if server == "" {
		return client.New(c.String("api-socket")), nil
	}
	var token string
	if f := c.String("token-file"); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, cli.Exit(fmt.Sprintf("--token-file: %v", err), ExitUsage)
		}
		token = strings.TrimSpace(string(data))
	}
	opts := client.TLSOptions{InsecureSkipVerify: c.Bool("insecure-skip-tls-verify")}
	if f := c.String("certificate-authority"); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, cli.Exit(fmt.Sprintf("--certificate-authority: %v", err), ExitUsage)
		}
		opts.CA = data
	}
	api, err := client.NewTLS(server, token, opts)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--server %s: %v", server, err), ExitUsage)
	}
	if u, _ := url.Parse(server); token != "" && u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		fmt.Fprintf(c.App.ErrWriter, "staticpod: warning: the API token goes to %s over plain http, readable by anyone on the way; serve the API with --tls-cert-file and use https://\n", u.Host)
	}
	return api, nil
}

// loopbackHost reports whether host names this machine: localhost, or a loopback IP.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func containerFlag() cli.Flag {
	return &cli.StringFlag{Name: "container", Aliases: []string{"c"}, Usage: "the container's `NAME`; optional when the pod has one container"}
}
