package cgroups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Driver is what makes a container's cgroup, by the kubelet's names: runc itself
// in the cgroup filesystem ("cgroupfs"), or systemd, as a scope in a slice ("systemd").
// On a host where systemd is PID 1 systemd owns the cgroup tree, and cgroups made
// behind its back sit beside its slices, outside its accounting and its shutdown.
type Driver string

// The cgroup drivers.
const (
	Cgroupfs Driver = "cgroupfs"
	Systemd  Driver = "systemd"
)

// ParseDriver checks a --cgroup-driver value; "" is left to detection.
func ParseDriver(s string) (Driver, error) {
	switch d := Driver(s); d {
	case "", Cgroupfs, Systemd:
		return d, nil
	}
	return "", fmt.Errorf("cgroup driver %q: use systemd or cgroupfs", s)
}

// systemdBooted is the directory that exists when systemd is PID 1 (sd_booted(3)).
const systemdBooted = "/run/systemd/system"

// criDriver asks containerd's CRI plugin which cgroup driver its runc runtime
// uses, the way the kubelet asks: RuntimeConfig (containerd 1.7 and later), else the
// SystemdCgroup option of its default runtime in the configuration Status reports
// (containerd 1.6). It returns "" and no error when containerd cannot tell: its CRI
// plugin is disabled (as in the containerd --start-containerd runs) or says nothing.
func criDriver(ctx context.Context, conn grpc.ClientConnInterface) (Driver, error) {
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	resp, err := rs.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	switch {
	case err == nil && resp.GetLinux() != nil:
		if resp.GetLinux().GetCgroupDriver() == runtimeapi.CgroupDriver_SYSTEMD {
			return Systemd, nil
		}
		return Cgroupfs, nil
	case err != nil && !noCRI(err):
		return "", fmt.Errorf("ask containerd for its cgroup driver: %w", err)
	}
	config, err := CRIConfig(ctx, conn)
	if err != nil {
		return "", fmt.Errorf("ask containerd for its cgroup driver: %w", err)
	}
	return configDriver(config)
}

// CRIConfig is the configuration of containerd's CRI plugin as its verbose Status
// reports it (JSON; containerd 1.6 and 2.x alike), or "" and no error when containerd
// serves no CRI. The cgroup driver and the runtime handlers are read from it.
func CRIConfig(ctx context.Context, conn grpc.ClientConnInterface) (string, error) {
	st, err := runtimeapi.NewRuntimeServiceClient(conn).Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if noCRI(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("containerd's CRI status: %w", err)
	}
	return st.GetInfo()["config"], nil
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

// configDriver reads the SystemdCgroup option of the default runtime from the CRI
// configuration's JSON. A configuration without a runc default runtime tells nothing.
func configDriver(config string) (Driver, error) {
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
		return Systemd, nil
	}
	return Cgroupfs, nil
}

// chooseDriver settles the driver from the one asked for (--cgroup-driver, "" for
// none) and containerd's (criDriver; "" when unknown). Given both, they must
// agree: a kubelet's pods and staticpod's on one containerd must not be placed by two
// drivers, and containerd's runc options are the one place the operator chose. Given
// neither, systemd where it is PID 1, else cgroupfs.
func chooseDriver(asked, containerd Driver, booted bool) (Driver, error) {
	switch {
	case asked != "" && containerd != "" && asked != containerd:
		return "", fmt.Errorf("%w: --cgroup-driver %s, but containerd's runc runtime uses the %s cgroup driver (SystemdCgroup = %t in its configuration): "+
			"start staticpod with --cgroup-driver %s, or set SystemdCgroup = %t under "+
			`[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options] in /etc/containerd/config.toml and restart containerd`,
			ErrDriverMismatch, asked, containerd, containerd == Systemd, containerd, asked == Systemd)
	case asked != "":
		return asked, nil
	case containerd != "":
		return containerd, nil
	case booted:
		return Systemd, nil
	}
	return Cgroupfs, nil
}

// ErrDriverMismatch is a configuration error: the driver asked for does not fit the
// host's containerd or systemd, and staticpod does not start.
var ErrDriverMismatch = errors.New("cgroup driver")

// Detect settles the runtime's cgroup driver (chooseDriver) from the one asked for
// (--cgroup-driver, "" for none) and containerd's, which it asks through conn, and
// checks that the systemd driver has a systemd to talk to. A driver that does not fit
// is an ErrDriverMismatch.
func Detect(ctx context.Context, conn grpc.ClientConnInterface, asked Driver) (Driver, error) {
	fromContainerd, err := criDriver(ctx, conn)
	if err != nil {
		return "", err
	}
	_, err = os.Stat(systemdBooted)
	booted := err == nil
	d, err := chooseDriver(asked, fromContainerd, booted)
	if err != nil {
		return "", err
	}
	if d == Systemd && !booted {
		return "", fmt.Errorf("%w: --cgroup-driver systemd, but systemd is not running here (no %s): use --cgroup-driver cgroupfs", ErrDriverMismatch, systemdBooted)
	}
	return d, nil
}
