package containerdrt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// systemdBooted is the directory that exists when systemd is PID 1 (sd_booted(3)).
const systemdBooted = "/run/systemd/system"

// criCgroupDriver asks containerd's CRI plugin which cgroup driver its runc runtime
// uses, the way the kubelet asks: RuntimeConfig (containerd 1.7 and later), else the
// SystemdCgroup option of its default runtime in the configuration Status reports
// (containerd 1.6). It returns "" and no error when containerd cannot tell: its CRI
// plugin is disabled (as in the containerd --start-containerd runs) or says nothing.
func criCgroupDriver(ctx context.Context, conn grpc.ClientConnInterface) (CgroupDriver, error) {
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	resp, err := rs.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	switch {
	case err == nil && resp.GetLinux() != nil:
		if resp.GetLinux().GetCgroupDriver() == runtimeapi.CgroupDriver_SYSTEMD {
			return CgroupDriverSystemd, nil
		}
		return CgroupDriverCgroupfs, nil
	case err != nil && !noCRI(err):
		return "", fmt.Errorf("ask containerd for its cgroup driver: %w", err)
	}
	st, err := rs.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if noCRI(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("ask containerd for its cgroup driver: %w", err)
	}
	return configCgroupDriver(st.GetInfo()["config"])
}

// noCRI reports whether err says that containerd serves no CRI, or not that call.
func noCRI(err error) bool {
	c := status.Code(err)
	return c == codes.Unimplemented || c == codes.NotFound
}

// criConfig is what matters here of the CRI configuration containerd 1.6 reports.
type criConfig struct {
	Containerd struct {
		DefaultRuntimeName string `json:"defaultRuntimeName"`
		Runtimes           map[string]struct {
			Type    string         `json:"runtimeType"`
			Options map[string]any `json:"options"`
		} `json:"runtimes"`
	} `json:"containerd"`
}

// configCgroupDriver reads the SystemdCgroup option of the default runtime from the CRI
// configuration's JSON. A configuration without a runc default runtime tells nothing.
func configCgroupDriver(config string) (CgroupDriver, error) {
	if config == "" {
		return "", nil
	}
	var cfg criConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return "", fmt.Errorf("read containerd's CRI configuration: %w", err)
	}
	rt, ok := cfg.Containerd.Runtimes[cfg.Containerd.DefaultRuntimeName]
	if !ok || rt.Type != "io.containerd.runc.v2" {
		return "", nil
	}
	if systemd, _ := rt.Options["SystemdCgroup"].(bool); systemd {
		return CgroupDriverSystemd, nil
	}
	return CgroupDriverCgroupfs, nil
}

// chooseCgroupDriver settles the driver from the one asked for (--cgroup-driver, "" for
// none) and containerd's (criCgroupDriver; "" when unknown). Given both, they must
// agree: a kubelet's pods and staticpod's on one containerd must not be placed by two
// drivers, and containerd's runc options are the one place the operator chose. Given
// neither, systemd where it is PID 1, else cgroupfs.
func chooseCgroupDriver(asked, containerd CgroupDriver, booted bool) (CgroupDriver, error) {
	switch {
	case asked != "" && containerd != "" && asked != containerd:
		return "", fmt.Errorf("%w: --cgroup-driver %s, but containerd's runc runtime uses the %s cgroup driver (SystemdCgroup = %t in its configuration): "+
			"start staticpod with --cgroup-driver %s, or set SystemdCgroup = %t under "+
			`[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options] in /etc/containerd/config.toml and restart containerd`,
			errCgroupDriverMismatch, asked, containerd, containerd == CgroupDriverSystemd, containerd, asked == CgroupDriverSystemd)
	case asked != "":
		return asked, nil
	case containerd != "":
		return containerd, nil
	case booted:
		return CgroupDriverSystemd, nil
	}
	return CgroupDriverCgroupfs, nil
}

// errCgroupDriverMismatch is a configuration error (ErrConfig): staticpod does not start.
var errCgroupDriverMismatch = fmt.Errorf("%w: cgroup driver", ErrConfig)

// detectCgroupDriver settles the runtime's cgroup driver (chooseCgroupDriver) and
// checks that the systemd driver has a systemd to talk to.
func detectCgroupDriver(ctx context.Context, conn grpc.ClientConnInterface, asked CgroupDriver) (CgroupDriver, error) {
	fromContainerd, err := criCgroupDriver(ctx, conn)
	if err != nil {
		return "", err
	}
	_, err = os.Stat(systemdBooted)
	booted := err == nil
	d, err := chooseCgroupDriver(asked, fromContainerd, booted)
	if err != nil {
		return "", err
	}
	if d == CgroupDriverSystemd && !booted {
		return "", fmt.Errorf("%w: --cgroup-driver systemd, but systemd is not running here (no %s): use --cgroup-driver cgroupfs", errCgroupDriverMismatch, systemdBooted)
	}
	return d, nil
}
