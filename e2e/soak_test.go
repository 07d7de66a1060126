//go:build soak

package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// The soak runs only with -tags soak (make soak DURATION=1h): it takes as long as it is
// told to.
var (
	soakDuration = flag.Duration("soak.duration", 3*time.Minute, "how long the soak runs")
	soakInterval = flag.Duration("soak.interval", time.Minute, "time between two samples")
	soakOut      = flag.String("soak.out", "", "file the samples are written to (default: in the test's temporary directory)")
)

// The soak's log rotation: the spamming container writes about 100 kB a second, so its
// log rotates every few seconds.
const (
	soakLogMaxSize  = 256 << 10
	soakLogMaxFiles = 3
)

// sample is what the soak measures of staticpod and containerd at one instant.
type sample struct {
	at                          time.Duration // since the soak started
	goroutines, fds             int
	rssKB                       int
	containers, tasks, snaps    int
	logBytes, maxContainerBytes int64 // the log dir, and the largest container's logs
}

func (s sample) String() string {
	return fmt.Sprintf("%6.1f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d",
		s.at.Minutes(), s.goroutines, s.fds, s.rssKB, s.containers, s.tasks, s.snaps, s.logBytes, s.maxContainerBytes)
}

const sampleHeader = "minute\tgoroutines\tfds\trss_kB\tcontainers\ttasks\tsnapshots\tlog_bytes\tmax_container_log_bytes"

// TestSoak runs staticpod for -soak.duration with pods that crash every few seconds,
// probes that fail and recover, an edit of the manifests every minute and a container
// that spams its log, samples staticpod's goroutines, descriptors and RSS and
// containerd's objects every -soak.interval, and asserts that none grows over the second
// half of the run and that rotation keeps the log directory bounded.
func TestSoak(t *testing.T) {
	n := newNode(t)
	out := *soakOut
	if out == "" {
		out = filepath.Join(t.TempDir(), "soak-samples.tsv")
	}
	pid := n.startSoak(out + ".staticpod.log")
	gen := 0
	writeSoakManifests(n, gen)
	n.awaitPhase("steady-node1", "Running")
	n.awaitPhase("spam-node1", "Running")
	n.awaitPhase("probed-node1", "Running")

	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, sampleHeader)
	t.Logf("samples go to %s\n%s", out, sampleHeader)
	start := time.Now()
	var samples []sample
	take := func() {
		s := n.sample(pid, time.Since(start))
		samples = append(samples, s)
		fmt.Fprintln(f, s)
		f.Sync()
		t.Log(s)
	}
	take()
	edit := time.NewTicker(time.Minute)
	defer edit.Stop()
	tick := time.NewTicker(*soakInterval)
	defer tick.Stop()
	end := time.After(*soakDuration)
	for done := false; !done; {
		select {
		case <-edit.C:
			gen++
			writeSoakManifests(n, gen)
		case <-tick.C:
			take()
		case <-end:
			done = true
		}
		if t.Failed() {
			return
		}
	}
	if time.Since(start)-samples[len(samples)-1].at > *soakInterval/2 {
		take()
	}
	checkFlat(t, samples)
	bound := int64(soakLogMaxFiles*soakLogMaxSize) + 64<<10 // a line or two beyond a rotation
	for _, s := range samples {
		if s.maxContainerBytes > bound {
			t.Errorf("minute %.1f: a container's logs hold %d bytes, want at most %d (%d files of %d)",
				s.at.Minutes(), s.maxContainerBytes, bound, soakLogMaxFiles, soakLogMaxSize)
		}
	}
}

// startSoak runs `staticpod run` with small log files, its log (info) in logPath, and
// returns its PID. The test's end stops it.
func (n *node) startSoak(logPath string) int {
	n.t.Helper()
	log, err := os.Create(logPath)
	if err != nil {
		n.t.Fatal(err)
	}
	args := append(n.runArgs(), "--cni-conf-dir", "", "--log-level", "info",
		"--container-log-max-size", strconv.Itoa(soakLogMaxSize),
		"--container-log-max-files", strconv.Itoa(soakLogMaxFiles))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	n.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
		}
		log.Close()
		if n.t.Failed() {
			n.t.Logf("staticpod's log is in %s", logPath)
		}
	})
	return cmd.Process.Pid
}

// writeSoakManifests writes generation gen of the soak's pods: each generation edits
// every one of them, so the crashing pods start afresh (a new pod, no back-off) and the
// others are replaced.
func writeSoakManifests(n *node, gen int) {
	env := fmt.Sprintf("    env: [{name: GEN, value: %q}]\n", strconv.Itoa(gen))
	withEnv := func(m string) string { return strings.Replace(m, "    command:", env+"    command:", 1) }
	for _, name := range []string{"crash-a", "crash-b", "crash-c"} {
		n.write(name+".yaml", withEnv(podManifest(name, "Always", "echo starting; sleep 2; echo crashing >&2; exit 3")))
	}
	n.write("steady.yaml", withEnv(podManifest("steady", "Always", "trap 'exit 0' TERM; while true; do sleep 1; done")))
	line := strings.Repeat("x", 190)
	n.write("spam.yaml", podManifest("spam", "Always",
		"trap 'exit 0' TERM; while true; do i=0; while [ $i -lt 500 ]; do echo \"$i "+line+"\"; i=$((i+1)); done; sleep 1; done"))
	n.write("probed.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: www, emptyDir: {}}]
  containers:
  - name: httpd
    image: %[1]s
    command: ["httpd", "-f", "-p", "8080", "-h", "/www"]
    volumeMounts: [{name: www, mountPath: /www}]
    readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1, failureThreshold: 1}
    livenessProbe: {httpGet: {path: /live, port: 8080}, periodSeconds: 1, failureThreshold: 3, initialDelaySeconds: 2}
  - name: toggle
    image: %[1]s
    volumeMounts: [{name: www, mountPath: /www}]
    command: ["sh", "-c", "trap 'exit 0' TERM; echo > /www/live; n=0; while true; do echo > /www/ready; sleep 5; rm -f /www/ready; sleep 5; n=$((n+1)); if [ $((n %% 4)) = 0 ]; then rm -f /www/live; sleep 5; echo > /www/live; fi; done"]
`, e2eImage))
}

// sample measures staticpod (pid) and the node's containerd namespace now.
func (n *node) sample(pid int, at time.Duration) sample {
	n.t.Helper()
	s := sample{at: at}
	// A connection of its own, closed after the answer: one kept alive would be counted
	// (a goroutine and a descriptor of the daemon's) until the server drops it.
	c := socketClient(n.path("staticpod.sock"))
	c.Transport.(*http.Transport).DisableKeepAlives = true
	resp, err := c.Get("http://staticpod/debug/pprof/goroutine?debug=1")
	if err != nil {
		n.t.Fatalf("goroutine profile: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		n.t.Fatalf("goroutine profile: %v", err)
	}
	first, _, _ := strings.Cut(string(body), "\n")
	if _, err := fmt.Sscanf(first, "goroutine profile: total %d", &s.goroutines); err != nil {
		n.t.Fatalf("goroutine profile: %q: %v", first, err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		n.t.Fatal(err)
	}
	s.fds = len(fds)
	s.rssKB = rss(n.t, pid)
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), n.ns), 30*time.Second)
	defer cancel()
	cs, err := n.d.Client.Containers(ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	s.containers = len(cs)
	ts, err := n.d.Client.TaskService().List(ctx, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	s.tasks = len(ts.Tasks)
	err = n.d.Client.SnapshotService("overlayfs").Walk(ctx, func(context.Context, snapshots.Info) error {
		s.snaps++
		return nil
	})
	if err != nil {
		n.t.Fatal(err)
	}
	s.logBytes, s.maxContainerBytes = logSizes(n.t, n.path("log/pods"))
	return s
}

// rss returns the resident set of pid in kB.
func rss(t testing.TB, pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// logSizes returns the bytes under the pod log dir and the most that one container's
// directory (<pod dir>/<container>) holds.
func logSizes(t testing.TB, dir string) (total, maxContainer int64) {
	per := map[string]int64{}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		total += info.Size()
		per[filepath.Dir(p)] += info.Size()
		return nil
	})
	for _, b := range per {
		maxContainer = max(maxContainer, b)
	}
	return total, maxContainer
}

// checkFlat fits a line through the second half of the samples of each measure and fails
// when it rises by more than the measure's tolerance over that half: a leak of one
// goroutine, descriptor or container a minute shows there, noise does not.
func checkFlat(t *testing.T, samples []sample) {
	half := samples[len(samples)/2:]
	if len(half) < 2 {
		t.Fatalf("%d samples: too few to fit a slope", len(samples))
	}
	measures := []struct {
		name string
		get  func(sample) float64
		tol  func(mean float64) float64
	}{
		{"goroutines", func(s sample) float64 { return float64(s.goroutines) }, func(m float64) float64 { return max(10, 0.1*m) }},
		{"fds", func(s sample) float64 { return float64(s.fds) }, func(m float64) float64 { return max(10, 0.1*m) }},
		{"rss_kB", func(s sample) float64 { return float64(s.rssKB) }, func(m float64) float64 { return max(8<<10, 0.2*m) }},
		{"containers", func(s sample) float64 { return float64(s.containers) }, func(m float64) float64 { return max(4, 0.25*m) }},
		{"tasks", func(s sample) float64 { return float64(s.tasks) }, func(m float64) float64 { return max(4, 0.25*m) }},
		{"snapshots", func(s sample) float64 { return float64(s.snaps) }, func(m float64) float64 { return max(4, 0.25*m) }},
		{"log_bytes", func(s sample) float64 { return float64(s.logBytes) }, func(m float64) float64 { return max(2<<20, 0.5*m) }},
	}
	for _, m := range measures {
		var xs, ys []float64
		for _, s := range half {
			xs = append(xs, s.at.Minutes())
			ys = append(ys, m.get(s))
		}
		slope, mean := fit(xs, ys)
		rise := slope * (xs[len(xs)-1] - xs[0])
		verdict := "flat"
		if rise > m.tol(mean) {
			verdict = "GROWS"
			t.Errorf("%s grows by %.1f over the second half (%.2f a minute, mean %.1f), want at most %.1f", m.name, rise, slope, mean, m.tol(mean))
		}
		t.Logf("%-10s slope %+8.2f/min over the second half, mean %10.1f, rise %+9.1f, tolerance %9.1f: %s", m.name, slope, mean, rise, m.tol(mean), verdict)
	}
}

// fit returns the least-squares slope of ys over xs, and the mean of ys.
func fit(xs, ys []float64) (slope, mean float64) {
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(ys))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 || math.IsNaN(num) {
		return 0, my
	}
	return num / den, my
}
