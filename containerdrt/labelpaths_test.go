package containerdrt

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"

	"github.com/staticpod/staticpod/containerdrt/pins"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// labelRuntime is a Runtime with the directories of a default install, for what reads
// labels without containerd.
func labelRuntime() *Runtime {
	return &Runtime{cfg: Config{RootDir: "/var/lib/staticpod", PodLogDir: "/var/log/pods", Log: LogConfig{ContainersDir: "/var/log/containers"}}}
}

// A container whose labels name paths outside staticpod's directories (made by hand in
// its namespace, or edited) has none: staticpod never removes, unmounts or serves them.
func TestLabelPathsStayInside(t *testing.T) {
	r := labelRuntime()
	for _, tt := range []struct {
		key, value string
		of         func(map[string]string) string
		want       string
	}{
		{LabelLogPath, "/var/log/pods/default_web-n_u1/c/0.log", r.logPathOf, "/var/log/pods/default_web-n_u1/c/0.log"},
		{LabelLogPath, "/etc/shadow", r.logPathOf, ""},
		{LabelLogPath, "/var/log/pods/../../../etc/shadow", r.logPathOf, ""},
		{LabelLogPath, "/var/log/pods", r.logPathOf, ""},
		{LabelLogPath, "/var/log/podsx/a.log", r.logPathOf, ""},
		{LabelLogPath, "var/log/pods/a.log", r.logPathOf, ""},
		{LabelTermination, "/var/lib/staticpod/pods/u1/containers/c/0.termination-log", r.terminationPathOf, "/var/lib/staticpod/pods/u1/containers/c/0.termination-log"},
		{LabelTermination, "/root/.ssh/id_ed25519", r.terminationPathOf, ""},
		{labelPinned, "/var/lib/staticpod/namespaces/web_abc", r.pinsOf, "/var/lib/staticpod/namespaces/web_abc"},
		{labelPinned, "/", r.pinsOf, ""},
		{labelPinned, "/var/lib/staticpod/namespaces", r.pinsOf, ""},
		{labelPinned, "/var/lib/staticpod", r.pinsOf, ""},
	} {
		if got := tt.of(map[string]string{tt.key: tt.value}); got != tt.want {
			t.Errorf("%s=%q: got %q, want %q", tt.key, tt.value, got, tt.want)
		}
	}
	for _, name := range []string{"../../etc/cron.d/x", "a/b"} {
		labels := map[string]string{LabelPodName: name, LabelPodNamespace: "default", LabelContainer: "c"}
		if got := r.logLinkOf(labels, "id"); got != "" {
			t.Errorf("log link of a pod named %q: %q, want none", name, got)
		}
	}
	labels := map[string]string{LabelPodName: "..", LabelPodNamespace: "default", LabelContainer: "c"}
	if got := r.logLinkOf(labels, "id"); got != "/var/log/containers/.._default_c-id.log" {
		t.Errorf("log link of a pod named ..: %q", got)
	}
}

// A sandbox whose pins label names "/" is not unpinned there: stopping it must not
// unmount or remove anything of the host's.
func TestSandboxPinsFromHostileLabel(t *testing.T) {
	r := labelRuntime()
	if dir := r.sandboxPins("id", map[string]string{LabelKind: string(runner.KindSandbox), labelPinned: "/"}); dir != "" {
		t.Errorf("sandboxPins with pins at / = %q, want none", dir)
	}
	if err := pins.Unpin(r.pinsOf(map[string]string{labelPinned: "/"})); err != nil {
		t.Errorf("unpinning no directory: %v", err)
	}
}

func TestFromLabelsOutOfRange(t *testing.T) {
	var c runner.Container
	err := fromLabels(&c, map[string]string{LabelKind: string(runner.KindContainer), LabelPodUID: "u1", LabelAttempt: "-3", LabelPodGrace: "9223372036854775807"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Attempt != 0 || c.PodGrace != nil {
		t.Errorf("attempt %d, grace %v; want 0 and none", c.Attempt, c.PodGrace)
	}
	if err := fromLabels(&c, map[string]string{LabelKind: string(runner.KindContainer), LabelPodUID: "u1", LabelPodGrace: "-1"}); err != nil || c.PodGrace != nil {
		t.Errorf("a negative grace: %v, %v; want none", err, c.PodGrace)
	}
}

// FuzzLabels decodes a container's labels as List does after staticpod restarts, from
// whatever anyone with access to containerd wrote: nothing may panic, what is decoded
// must be in range, and no path read from a label may lie outside staticpod's
// directories. Each line of extra is one more key=value label.
func FuzzLabels(f *testing.F) {
	f.Add("container", "u1", "web-n", "default", "c", "2", "30", `{"name":"c","lifecycle":{"preStop":{"exec":{"command":["sh"]}}}}`,
		"/var/log/pods/default_web-n_u1/c/2.log", "/var/lib/staticpod/pods/u1/containers/c/2.termination-log", "", "2026-11-24T12:00:00Z\n"+labelExitCode+"=1")
	f.Add("sandbox", "u1", "../../etc", "a/b", "..", "-1", "-5", "{", "/etc/shadow", "/var/lib/staticpod/pods/../../../root", "/", labelPodIPs+"=10.0.0.1,::1,x\n"+labelPinnedFiles+"=../../x")
	f.Add("sandbox", "", "", "", "", "99999999999999999999", "9223372036854775807", "null", "/var/log/pods/\x00", "relative", "/var/lib/staticpod/namespaces/x", labelNetwork+"={\"conf\":1}")
	r := labelRuntime()
	f.Fuzz(func(t *testing.T, kind, uid, name, namespace, container, attempt, grace, preStop, logPath, termPath, pinned, extra string) {
		labels := map[string]string{
			LabelKind: kind, LabelPodUID: uid, LabelPodName: name, LabelPodNamespace: namespace, LabelContainer: container,
			LabelAttempt: attempt, LabelPodGrace: grace, LabelPreStop: preStop, LabelLogPath: logPath, LabelTermination: termPath,
			labelPinned: pinned,
		}
		for _, line := range strings.Split(extra, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				labels[k] = v
			}
		}
		c, err := toContainer(containers.Container{ID: "id", Labels: labels}, nil)
		if err == nil {
			if c.Kind != runner.KindSandbox && c.Kind != runner.KindContainer {
				t.Errorf("kind %q decoded", c.Kind)
			}
			if err := manifests.CheckUID(c.PodUID); err != nil {
				t.Errorf("pod UID decoded: %v", err)
			}
			if c.Attempt < 0 {
				t.Errorf("attempt %d decoded from %q", c.Attempt, attempt)
			}
			if c.PodGrace != nil && *c.PodGrace < 0 {
				t.Errorf("grace %v decoded from %q", *c.PodGrace, grace)
			}
			if !c.StopDeadline.IsZero() && c.StopDeadline.Before(time.Time{}) {
				t.Errorf("stop deadline %v", c.StopDeadline)
			}
		}
		for _, p := range []struct{ dir, path string }{
			{r.cfg.PodLogDir, r.logPathOf(labels)},
			{filepath.Join(r.cfg.RootDir, podsDir), r.terminationPathOf(labels)},
			{filepath.Join(r.cfg.RootDir, namespacesDir), r.pinsOf(labels)},
			{filepath.Join(r.cfg.RootDir, namespacesDir), r.sandboxPins("id", labels)},
		} {
			if p.path != "" && (!strings.HasPrefix(p.path, p.dir+"/") || filepath.Clean(p.path) != p.path) {
				t.Errorf("a label gave %q, outside %s", p.path, p.dir)
			}
		}
		if link := r.logLinkOf(labels, "id"); link != "" && filepath.Dir(link) != r.cfg.Log.ContainersDir {
			t.Errorf("a label gave the log link %q, outside %s", link, r.cfg.Log.ContainersDir)
		}
	})
}
