package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/staticpod/staticpod/api/client"
	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/images"
	"github.com/staticpod/staticpod/containerdrt/podnet"
	"github.com/staticpod/staticpod/containerdrt/shims"
	"github.com/staticpod/staticpod/httpsource"
	"github.com/staticpod/staticpod/logs"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/devices"
	"github.com/staticpod/staticpod/validate"
	"github.com/staticpod/staticpod/watcher"
)

// defaultManifestPath is the kubelet's usual --pod-manifest-path. Every other default
// is the constant of the package that owns the setting. Flag names follow the
// kubelet's where the kubelet has one, so that habits carry over.
const defaultManifestPath = "/etc/kubernetes/manifests"

func runFlags() []cli.Flag {
	str := func(name, value, usage string, aliases ...string) cli.Flag {
		return &cli.StringFlag{Name: name, Value: value, Usage: usage, Aliases: aliases, EnvVars: spcli.Env(name)}
	}
	dur := func(name string, value time.Duration, usage string) cli.Flag {
		return &cli.DurationFlag{Name: name, Value: value, Usage: usage, EnvVars: spcli.Env(name)}
	}
	flags := []cli.Flag{
		str("pod-manifest-path", defaultManifestPath, "directory (or file) of static pod manifests"),
		dur("file-check-frequency", watcher.DefaultPeriod, "how often the manifest path is rescanned"),
		str("manifest-url", "", "URL to poll for static pod manifests"),
		&cli.StringSliceFlag{Name: "manifest-url-header", Usage: "`Key:Value` header sent with --manifest-url (repeatable)", EnvVars: spcli.Env("manifest-url-header")},
		dur("http-check-frequency", httpsource.DefaultPeriod, "how often --manifest-url is polled"),
		str("manifest-url-ca-file", "", "PEM file of CA certificates trusted for an https --manifest-url, beside the system's"),
		spcli.NodeNameFlag(),
		str("root-dir", spcli.DefaultRootDir, "directory for staticpod's state"),
		str("run-dir", "", "directory for what lasts no longer than a boot, best on a tmpfs: the pods' /etc files, /dev/shm and termination logs, their pinned namespaces (default: "+spcli.DefaultRunDir+" with the default --root-dir, else <root-dir>/run)"),
		str("device-plugin-dir", devices.DefaultDir, "directory of the device plugins' sockets: kubelet.sock, where they register, is served there (\"\" for none)"),
		str("pod-log-dir", logs.DefaultPodsDir, "directory for the pods' CRI log files"),
		str("container-log-dir", logs.DefaultContainersDir, "directory of the kubelet-style <pod>_<namespace>_<container>-<id>.log links (\"\" for none)"),
		&cli.Int64Flag{Name: "container-log-max-size", Value: logs.DefaultMaxSize, Usage: "bytes a container log file grows to before it is rotated", EnvVars: spcli.Env("container-log-max-size")},
		&cli.IntFlag{Name: "container-log-max-files", Value: logs.DefaultMaxFiles, Usage: "log files kept per container, the current one included", EnvVars: spcli.Env("container-log-max-files")},
		&cli.GenericFlag{Name: "containerd-address", Aliases: []string{"container-runtime-endpoint"}, Value: &socketFlag{path: spcli.DefaultContainerdAddress},
			Usage: "containerd's socket: a path, or unix:///path as the kubelet's --container-runtime-endpoint", EnvVars: spcli.Env("containerd-address")},
		str("containerd-namespace", containerdrt.DefaultNamespace, "containerd namespace staticpod owns"),
		&cli.BoolFlag{Name: "start-containerd", Usage: "start and supervise a containerd under the root dir when none answers", EnvVars: spcli.Env("start-containerd")},
		str("cni-conf-dir", podnet.DefaultConfDir, "directory of CNI network configurations: the first in sorted order is the pod network (\"\" for none: loopback only)"),
		&cli.StringSliceFlag{Name: "cni-bin-dir", Value: cli.NewStringSlice(podnet.DefaultBinDirs...), Usage: "directory of CNI plugins (repeatable)", EnvVars: spcli.Env("cni-bin-dir")},
		&cli.BoolFlag{Name: "cni-default-bridge", Usage: "write a bridge network configuration into --cni-conf-dir when it holds none", EnvVars: spcli.Env("cni-default-bridge")},
		&cli.StringSliceFlag{Name: "cdi-spec-dirs", Value: cli.NewStringSlice(containerdrt.DefaultCDISpecDirs...), Usage: "directories of CDI specs, by rising priority, for the devices pods ask for with cdi.k8s.io/ annotations (repeatable)", EnvVars: spcli.Env("cdi-spec-dirs")},
		str("image-dir", "", "directory of image tarballs imported at start and when added"),
		str("registry-config", "", "docker config.json with registry credentials, searched before the usual places"),
		&cli.StringSliceFlag{Name: "insecure-registry", Usage: "registry `host[:port]` or CIDR reached over plain HTTP (repeatable)", EnvVars: spcli.Env("insecure-registry")},
		str("registry-config-dir", images.DefaultRegistryConfigDir, "containerd's registry host configuration, <dir>/<host>/hosts.toml: mirrors, CAs, client certificates, plain-HTTP hosts (\"\" for none)"),
		str("image-credential-provider-config", "", "the kubelet's CredentialProviderConfig file (or directory): credential provider plugins for pulls"),
		str("image-credential-provider-bin-dir", "", "directory of the credential provider plugins' binaries"),
		&cli.IntFlag{Name: "image-gc-high-threshold", Value: runner.DefaultImageGCHighThreshold, Usage: "percent of the image filesystem in use at which unused images are removed (100: never)", EnvVars: spcli.Env("image-gc-high-threshold")},
		&cli.IntFlag{Name: "image-gc-low-threshold", Value: runner.DefaultImageGCLowThreshold, Usage: "percent of the image filesystem in use that image garbage collection frees down to", EnvVars: spcli.Env("image-gc-low-threshold")},
		dur("image-minimum-gc-age", runner.DefaultImageMinimumGCAge, "how long an unused image is kept at least, from its pull or import"),
		str("api-socket", client.DefaultSocket, "unix socket of the API (mode 0600)"),
		str("listen", "", "optional TCP address for the API"),
		str("api-token-file", "", "file holding the bearer token required over TCP"),
		str("tls-cert-file", "", "PEM certificate (with its chain) the TCP listener serves HTTPS with; needs --tls-private-key-file"),
		str("tls-private-key-file", "", "PEM private key of --tls-cert-file"),
		dur("pleg-relist-period", runner.DefaultRelistPeriod, "how often containerd is relisted"),
		dur("progress-deadline", 0, "roll a pod's new revision that is not Ready this long after its containers start back to its last Ready one, for pods without the "+manifests.AnnotationProgressDeadline+" annotation (0: off)"),
		&cli.BoolFlag{Name: "pleg-exit-events", Value: true, Usage: "relist at once when containerd reports a task exit (false: on the relist period only)", EnvVars: spcli.Env("pleg-exit-events")},
		str("cgroup-driver", "", "what makes the containers' cgroups: systemd or cgroupfs (default: what containerd's runc runtime uses, else systemd where it is PID 1)"),
		str("cgroup-root", "", "parent of the pod cgroups: a path for cgroupfs (default /<containerd-namespace>), a slice for systemd (default "+cgroups.DefaultSystemdRoot+")"),
		&cli.StringSliceFlag{Name: "runtime-handler", Usage: "runtime handler `NAME=VALUE` that runtimeClassName may name, beside containerd's CRI runtimes: VALUE an OCI runtime binary run by the runc shim (crun=/usr/bin/crun) or a containerd runtime type (kata=io.containerd.kata.v2) (repeatable)", EnvVars: spcli.Env("runtime-handler")},
		&cli.Int64Flag{Name: "pod-max-pids", Value: -1, Usage: "the most processes a pod may have (its cgroup's pids.max); -1 for no cap", EnvVars: spcli.Env("pod-max-pids")},
		dur("shutdown-grace-period", 0, "when the machine shuts down, stop the pods within this time, holding the shutdown with a logind inhibitor lock (0: off)"),
		dur("shutdown-grace-period-critical-pods", 0, "of --shutdown-grace-period, the time kept for the system-node-critical pods, which stop last"),
		&cli.BoolFlag{Name: "stop-pods-on-exit", Usage: "stop every pod when staticpod exits (by default they keep running)", EnvVars: spcli.Env("stop-pods-on-exit")},
		str("log-level", "info", "debug, info, warn or error"),
		str("log-format", "text", "text or json"),
	}
	flags = append(flags, validate.NodeFlags()...)
	flags = append(flags, validate.ReservedFlags()...)
	return append(flags, validate.RestrictionFlags()...)
}

// socketFlag is the value of --containerd-address: containerd's socket as a path (see
// shims.SocketPath), so that everything run hands it to (the runtime, the
// containerd --start-containerd starts) gets a path, however it was spelled.
type socketFlag struct{ path string }

func (f *socketFlag) Set(address string) error {
	path, err := shims.SocketPath(address)
	if err != nil {
		return err
	}
	f.path = path
	return nil
}

func (f *socketFlag) String() string { return f.path }
