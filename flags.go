package main

import (
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// Defaults of the contract (DESIGN.md). Flag names follow the kubelet's where the
// kubelet has one, so that habits carry over.
const (
	defaultManifestPath    = "/etc/kubernetes/manifests"
	defaultRootDir         = "/var/lib/staticpod"
	defaultPodLogDir       = "/var/log/pods"
	defaultContainerLogDir = "/var/log/containers"
	defaultLogMaxSize      = 10 << 20
	defaultLogMaxFiles     = 5
	defaultContainerdSock  = "/run/containerd/containerd.sock"
	defaultNamespace       = "staticpod"
	defaultAPISocket       = "/run/staticpod/staticpod.sock"
	defaultCheckFrequency  = 20 * time.Second
	defaultRelistPeriod    = time.Second
)

// env is the environment variable that sets a flag: STATICPOD_<FLAG>, upper case with
// underscores, e.g. STATICPOD_POD_MANIFEST_PATH.
func env(flag string) []string {
	return []string{"STATICPOD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))}
}

// nodeNameFlag is shared by every command that computes static pod names.
func nodeNameFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "hostname-override",
		Usage:   "node name that static pod names are suffixed with (default: the host name)",
		EnvVars: env("hostname-override"),
	}
}

// nodeName is the node name static pods are named after: --hostname-override, else the
// host name, lower-cased as the kubelet does.
func nodeName(c *cli.Context) (string, error) {
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

func runFlags() []cli.Flag {
	str := func(name, value, usage string, aliases ...string) cli.Flag {
		return &cli.StringFlag{Name: name, Value: value, Usage: usage, Aliases: aliases, EnvVars: env(name)}
	}
	dur := func(name string, value time.Duration, usage string) cli.Flag {
		return &cli.DurationFlag{Name: name, Value: value, Usage: usage, EnvVars: env(name)}
	}
	return []cli.Flag{
		str("pod-manifest-path", defaultManifestPath, "directory (or file) of static pod manifests"),
		dur("file-check-frequency", defaultCheckFrequency, "how often the manifest path is rescanned"),
		str("manifest-url", "", "URL to poll for static pod manifests"),
		&cli.StringSliceFlag{Name: "manifest-url-header", Usage: "`Key:Value` header sent with --manifest-url (repeatable)", EnvVars: env("manifest-url-header")},
		dur("http-check-frequency", defaultCheckFrequency, "how often --manifest-url is polled"),
		str("manifest-url-ca-file", "", "PEM file of CA certificates trusted for an https --manifest-url, beside the system's"),
		nodeNameFlag(),
		str("root-dir", defaultRootDir, "directory for staticpod's state"),
		str("pod-log-dir", defaultPodLogDir, "directory for the pods' CRI log files"),
		str("container-log-dir", defaultContainerLogDir, "directory of the kubelet-style <pod>_<namespace>_<container>-<id>.log links (\"\" for none)"),
		&cli.Int64Flag{Name: "container-log-max-size", Value: defaultLogMaxSize, Usage: "bytes a container log file grows to before it is rotated", EnvVars: env("container-log-max-size")},
		&cli.IntFlag{Name: "container-log-max-files", Value: defaultLogMaxFiles, Usage: "log files kept per container, the current one included", EnvVars: env("container-log-max-files")},
		str("containerd-address", defaultContainerdSock, "containerd's socket", "container-runtime-endpoint"),
		str("containerd-namespace", defaultNamespace, "containerd namespace staticpod owns"),
		&cli.BoolFlag{Name: "start-containerd", Usage: "start and supervise a containerd under the root dir when none answers", EnvVars: env("start-containerd")},
		str("image-dir", "", "directory of image tarballs imported at start and when added"),
		str("registry-config", "", "docker config.json with registry credentials, searched before the usual places"),
		&cli.StringSliceFlag{Name: "insecure-registry", Usage: "registry `host[:port]` or CIDR reached over plain HTTP (repeatable)", EnvVars: env("insecure-registry")},
		str("api-socket", defaultAPISocket, "unix socket of the API (mode 0600)"),
		str("listen", "", "optional TCP address for the API"),
		str("api-token-file", "", "file holding the bearer token required over TCP"),
		dur("pleg-relist-period", defaultRelistPeriod, "how often containerd is relisted"),
		&cli.BoolFlag{Name: "stop-pods-on-exit", Usage: "stop every pod when staticpod exits (by default they keep running)", EnvVars: env("stop-pods-on-exit")},
		str("log-level", "info", "debug, info, warn or error"),
		str("log-format", "text", "text or json"),
	}
}
