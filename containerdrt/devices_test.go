package containerdrt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/logs"
	"github.com/staticpod/staticpod/runner"
)

// cdiSpec is a CDI spec of the vendor example.com, class dev: its devices are
// character devices at /dev/ttyS<n> in the container made from the host's /dev/zero
// (1:5), each with an environment variable naming it; the spec adds to each container
// that gets one of them a variable, a read-only bind of the directory shared and a
// createRuntime hook that writes the file ran in that directory on the host.
func cdiSpec(shared string, devices ...string) string {
	var b strings.Builder
	b.WriteString("cdiVersion: 0.6.0\nkind: example.com/dev\ndevices:\n")
	for i, d := range devices {
		b.WriteString("- name: " + d + "\n  containerEdits:\n    deviceNodes:\n")
		b.WriteString("    - {path: /dev/ttyS" + string(rune('0'+9-i)) + ", hostPath: /dev/zero}\n")
		b.WriteString("    env: [SERIAL_PORT=/dev/ttyS" + string(rune('0'+9-i)) + "]\n")
	}
	b.WriteString("containerEdits:\n  env: [SERIAL_VENDOR=example]\n")
	b.WriteString("  mounts:\n  - {hostPath: " + shared + ", containerPath: /opt/serial, options: [ro, bind]}\n")
	b.WriteString("  hooks:\n  - {hookName: createRuntime, path: /bin/sh, args: [sh, -c, 'echo ran > " + shared + "/ran']}\n")
	return b.String()
}

// writeAtomically replaces path with data as editors and package managers do: a
// temporary file renamed over it.
func writeAtomically(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// cdiPod is a pod whose container asks for device with a cdi.k8s.io/ annotation and
// prints what it got of it.
const cdiPod = `
apiVersion: v1
kind: Pod
metadata:
  name: NAME
  annotations: {cdi.k8s.io/serial: DEVICE}
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
  - name: app
    image: ` + testImage + `
    command: [sh, -c, 'stat -c "%F %t:%T" $SERIAL_PORT; head -c 4 $SERIAL_PORT | od -An -tx1; echo "$SERIAL_PORT $SERIAL_VENDOR"; cat /opt/serial/hello; echo end']
`

// mustRunCDIPod runs a pod named name asking for device and returns what it printed.
func (r *testRuntime) mustRunCDIPod(t *testing.T, name, device string) string {
	t.Helper()
	pod := loadPod(t, strings.NewReplacer("NAME", name, "DEVICE", device).Replace(cdiPod))
	c := r.mustRunPod(t, pod)["app"]
	r.awaitState(t, c.ID, runner.StateExited)
	var out bytes.Buffer
	testenv.Await(t, "the output of "+name, 10*time.Second, func() bool {
		out.Reset()
		return logs.Read(r.ctx, c.LogPath, logs.ReadOptions{Tail: -1}, &out) == nil && strings.HasSuffix(out.String(), "end\n")
	})
	return strings.TrimSuffix(out.String(), "end\n")
}

// A pod annotated cdi.k8s.io/<name>: example.com/dev=serial0 gets what the CDI spec of
// that device says: its device node (a character device with the host file's numbers),
// environment, mount and hook. A device no spec defines is refused, naming it, as a
// configuration error; a spec changed while the runtime runs is read for the next
// container that asks for one of its devices.
func TestCDIAnnotationGivesTheSpecsDevice(t *testing.T) {
	specs, shared := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(shared, "hello"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(specs, "example.yaml")
	writeAtomically(t, path, cdiSpec(shared, "serial0"))
	r := newTestRuntime(t, func(c *Config) { c.CDISpecDirs = []string{filepath.Join(t.TempDir(), "missing"), specs} })

	got := r.mustRunCDIPod(t, "serial", "example.com/dev=serial0")
	want := "character special file 1:5\n 00 00 00 00\n/dev/ttyS9 example\nhello from the host\n"
	if got != want {
		t.Errorf("the container of a pod annotated with example.com/dev=serial0 printed\n%s\nwant\n%s", got, want)
	}
	if ran, err := os.ReadFile(filepath.Join(shared, "ran")); err != nil || string(ran) != "ran\n" {
		t.Errorf("the spec's createRuntime hook wrote %q, %v; want ran", ran, err)
	}

	pod := loadPod(t, strings.NewReplacer("NAME", "unknown", "DEVICE", "example.com/dev=serial1").Replace(cdiPod))
	c := &pod.Spec.Containers[0]
	img, err := r.EnsureImage(r.ctx, runner.PullRequest{Image: c.Image, Policy: c.ImagePullPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if created, err := r.create(runner.CreateRequest{Pod: pod, Container: c, Image: img}); !errors.Is(err, runner.ErrCreateConfig) ||
		!strings.Contains(err.Error(), `container "app": unresolvable CDI devices example.com/dev=serial1: no CDI spec in `) || !strings.Contains(err.Error(), specs) {
		t.Errorf("CreateContainer of a pod asking for a device no spec defines = %+v, %v; want CreateContainerConfigError naming the device and the spec directories", created, err)
	}
	if err := r.RemovePodData(r.ctx, pod.UID); err != nil {
		t.Fatal(err)
	}

	writeAtomically(t, path, cdiSpec(shared, "serial0", "serial1"))
	got = r.mustRunCDIPod(t, "changed", "example.com/dev=serial1")
	if want := "character special file 1:5\n 00 00 00 00\n/dev/ttyS8 example\nhello from the host\n"; got != want {
		t.Errorf("after the spec gained example.com/dev=serial1, its pod printed\n%s\nwant\n%s", got, want)
	}
}
