package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// serialSpec is a CDI spec whose device example.com/serial=port0 is the host's
// /dev/zero (1:5) at /dev/ttyS9 in the container, with a variable naming it.
const serialSpec = `cdiVersion: 0.6.0
kind: example.com/serial
devices:
- name: port0
  containerEdits:
    deviceNodes:
    - {path: /dev/ttyS9, hostPath: /dev/zero}
containerEdits:
  env: [SERIAL_PORT=/dev/ttyS9]
`

// A pod asking for a CDI device with a cdi.k8s.io/ annotation waits, with
// CreateContainerConfigError and a Failed event naming the device, while no spec of
// --cdi-spec-dirs defines it; once a spec that does is written, staticpod reads it
// without a restart and the pod's container runs with the device and its variable.
func TestCDIDeviceFromASpecWrittenWhileRunning(t *testing.T) {
	n := newNode(t)
	specs := n.path("cdi")
	if err := os.MkdirAll(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	n.start("--cdi-spec-dirs", specs)
	n.write("serial.yaml", strings.Replace(podManifest("serial", "Always", "sleep 3600"),
		"  name: serial\n", "  name: serial\n  annotations: {cdi.k8s.io/serial: example.com/serial=port0}\n", 1))

	const unknown = `container "main": unresolvable CDI devices example.com/serial=port0: no CDI spec in ` // + the directory
	n.awaitEvent("Failed", unknown+specs)
	api := []string{"--api-socket", n.path("staticpod.sock")}
	if out, _, _ := runSplit(t, "", nil, append([]string{"describe", "serial-node1"}, api...)...); !strings.Contains(out, "CreateContainerConfigError") || !strings.Contains(out, "example.com/serial=port0") {
		t.Errorf("describe of a pod asking for an unknown CDI device does not say why it waits:\n%s", out)
	}
	if cs := n.containers(); len(cs) != 0 {
		t.Errorf("containers %v of a pod asking for an unknown CDI device, want none", summary(cs))
	}

	tmp := filepath.Join(specs, ".serial.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(serialSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(specs, "serial.yaml")); err != nil {
		t.Fatal(err)
	}
	n.await("the serial pod, after its spec was written", 2*time.Minute, running("serial-node1/main/0"))
	n.awaitPhase("serial-node1", corev1.PodRunning) // as the daemon, which exec asks, sees it
	out, code := n.execIn("serial-node1", "sh", "-c", `stat -c "%n %F %t:%T" $SERIAL_PORT`)
	if want := "/dev/ttyS9 character special file 1:5\n"; code != 0 || out != want {
		t.Errorf("in the pod: %q (exit %d), want %q", out, code, want)
	}
}
