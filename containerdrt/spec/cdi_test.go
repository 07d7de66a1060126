package spec

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/staticpod/staticpod/runner"
)

// cdiTestRegistry is a registry of the CDI specs files holds (file name -> content),
// in a directory of the test's own, read once.
func cdiTestRegistry(t *testing.T, files map[string]string) *cdi.Cache {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	registry, _ := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	return registry
}

const cdiTestSpec = `cdiVersion: 0.6.0
kind: example.com/dev
devices:
- name: serial0
  containerEdits:
    deviceNodes: [{path: /dev/ttyS9, hostPath: /dev/zero}]
    env: [SERIAL_PORT=/dev/ttyS9]
containerEdits:
  env: [PATH=/cdi/bin]
  mounts: [{hostPath: /opt/vendor, containerPath: /opt/vendor, options: [ro, bind]}]
`

// The CDI devices of a container come last, adding their device node (and the device
// cgroup's permission for it), environment and mounts to what the spec holds; a device
// no spec defines refuses the container as a configuration error naming the device
// and the spec files that did not load.
func TestContainerAppliesCDIDevicesLast(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{Env: []string{"PATH=/bin"}})
	in.Container.Command = []string{"sh"}
	in.CDI = cdiTestRegistry(t, map[string]string{"example.yaml": cdiTestSpec, "broken.yaml": "cdiVersion: 0.6.0\nkind: nope\n"})
	in.CDIDevices = []string{"example.com/dev=serial0"}
	opts, err := Container(in)
	if err != nil {
		t.Fatalf("Container: %v", err)
	}
	s := specFromOpts(t, specUsersRootfs(t), opts)
	if !slices.Contains(s.Process.Env, "SERIAL_PORT=/dev/ttyS9") || !slices.Contains(s.Process.Env, "PATH=/cdi/bin") || slices.Contains(s.Process.Env, "PATH=/bin") {
		t.Errorf("env %v, want the CDI spec's SERIAL_PORT and PATH, over the image's", s.Process.Env)
	}
	var node, allowed bool
	for _, d := range s.Linux.Devices {
		node = node || (d.Path == "/dev/ttyS9" && d.Type == "c" && d.Major == 1 && d.Minor == 5)
	}
	for _, d := range s.Linux.Resources.Devices {
		allowed = allowed || (d.Allow && d.Type == "c" && d.Major != nil && *d.Major == 1 && d.Minor != nil && *d.Minor == 5 && d.Access == "rwm")
	}
	if !node || !allowed {
		t.Errorf("devices %+v, device cgroup %+v: want /dev/ttyS9 as c 1:5, allowed rwm", s.Linux.Devices, s.Linux.Resources.Devices)
	}
	if !slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/opt/vendor" && m.Source == "/opt/vendor" }) {
		t.Errorf("mounts %+v, want the CDI spec's /opt/vendor", s.Mounts)
	}

	in.CDIDevices = []string{"example.com/dev=serial0", "example.com/dev=serial1"}
	_, err = Container(in)
	if !errors.Is(err, runner.ErrCreateConfig) || !strings.Contains(err.Error(), `container "app": unresolvable CDI devices example.com/dev=serial1: no CDI spec in `) ||
		!strings.Contains(err.Error(), "broken.yaml") {
		t.Errorf("Container with a device no spec defines = %v, want ErrCreateConfig naming the container, the device and the spec that did not load", err)
	}
}
