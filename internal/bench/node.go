package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
)

// Image is the image every benchmark pod runs: busybox, built from busybox-static.
const Image = "localhost/busybox:bench"

// nodeName is every node's name: static pods are named <pod>-<node>.
const nodeName = "bench"

// Node is one staticpod daemon with its manifest directory, root dir and containerd
// namespace, on the benchmark's containerd.
type Node struct {
	Name      string // also its containerd namespace
	Dir       string
	Manifests string
	Binary    string
	Flags     []string // beyond the ones every node has

	d   *testenv.Daemon
	cmd *exec.Cmd
	log *os.File
	// Started is when the daemon's process was started.
	Started time.Time
	exited  chan struct{}
}

// NewNode makes a node's directories under dir and imports the image into its
// namespace.
func NewNode(ctx context.Context, d *testenv.Daemon, dir, name, binary string, flags ...string) (*Node, error) {
	n := &Node{Name: name, Dir: filepath.Join(dir, name), Binary: binary, Flags: flags, d: d}
	n.Manifests = filepath.Join(n.Dir, "manifests")
	if err := os.MkdirAll(n.Manifests, 0o755); err != nil {
		return nil, err
	}
	help := runHelp(binary)
	if strings.Contains(help, "--run-dir") {
		// As /run/staticpod is on every machine with systemd (Run.Close unmounts it).
		if err := testenv.MountTmpfs(n.path("run"), "mode=0700"); err != nil {
			return nil, err
		}
		n.Flags = append([]string{"--run-dir", n.path("run")}, n.Flags...)
	}
	if strings.Contains(help, "--device-plugin-dir") {
		// Not the host's, which another node of the run serves too.
		n.Flags = append([]string{"--device-plugin-dir", n.path("device-plugins")}, n.Flags...)
	}
	if _, err := testenv.ImportImage(ctx, d.Client, name, testenv.ImageOptions{Ref: Image}); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Node) path(rel string) string { return filepath.Join(n.Dir, rel) }

// runHelp is binary's `run --help`, to tell which flags it takes: the benchmark runs
// staticpods from before --run-dir (which kept the files of one boot in the root dir)
// and --device-plugin-dir too, to compare them in one run.
func runHelp(binary string) string {
	out, _ := exec.Command(binary, "run", "--help").Output()
	return string(out)
}

// Start runs `staticpod run` for the node, with staticpod's defaults but for where it
// keeps things, as a service manager starts it: without the Go runtime's settings of
// the benchmark's environment (see daemonEnv). Its log goes to <dir>/staticpod.log.
func (n *Node) Start() error {
	args := append([]string{"run",
		"--pod-manifest-path", n.Manifests,
		"--root-dir", n.path("root"),
		"--pod-log-dir", n.path("log/pods"),
		"--container-log-dir", n.path("log/containers"),
		"--containerd-address", n.d.Address,
		"--containerd-namespace", n.Name,
		"--api-socket", n.path("staticpod.sock"),
		"--image-dir", "",
		"--cni-conf-dir", "",
		"--hostname-override", nodeName,
	}, n.Flags...)
	log, err := os.OpenFile(n.path("staticpod.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.log = log
	n.cmd = exec.Command(n.Binary, args...)
	n.cmd.Stdout, n.cmd.Stderr = log, log
	n.cmd.Env = daemonEnv(os.Environ())
	n.exited = make(chan struct{})
	n.Started = time.Now()
	if err := n.cmd.Start(); err != nil {
		return err
	}
	go func() { n.cmd.Wait(); close(n.exited) }()
	return nil
}

// goRuntimeSettings are the environment variables that change how the Go runtime
// behaves: the daemon paces its own GOGC (see internal/gcpace) unless
// GOGC is set, and its memory is measured as it runs for a user.
var goRuntimeSettings = []string{"GOGC", "GOMEMLIMIT", "GODEBUG", "GOMAXPROCS"}

// daemonEnv is env without goRuntimeSettings.
func daemonEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(goRuntimeSettings, k)
	})
}

// PID is the daemon's process ID, 0 when it does not run.
func (n *Node) PID() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Stop sends SIGTERM and waits for the daemon to exit; the pods keep running.
func (n *Node) Stop() error {
	if n.cmd == nil {
		return nil
	}
	defer func() { n.cmd = nil; n.log.Close() }()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		return nil
	case <-time.After(time.Minute):
		n.cmd.Process.Kill()
		<-n.exited
		return fmt.Errorf("%s: no exit a minute after SIGTERM", n.Name)
	}
}

// Write saves a manifest the way editors do: a temp file, then a rename.
func (n *Node) Write(name, content string) error {
	tmp := filepath.Join(n.Manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(n.Manifests, name))
}

// Remove deletes a manifest.
func (n *Node) Remove(name string) error {
	return os.Remove(filepath.Join(n.Manifests, name))
}

// Clear removes every manifest and waits until the namespace holds no container.
func (n *Node) Clear(ctx context.Context) error { return n.RemovePrefixed(ctx, "", 0) }

// AwaitContainers waits until the node's namespace holds count containers.
func (n *Node) AwaitContainers(ctx context.Context, count int, timeout time.Duration) error {
	ctx = namespaces.WithNamespace(ctx, n.Name)
	deadline := time.Now().Add(timeout)
	for {
		cs, err := n.d.Client.Containers(ctx)
		if err == nil && len(cs) == count {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: %d containers after %s, want %d (err %v)", n.Name, len(cs), timeout, count, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// overUnixSocket is an HTTP client whose every request goes to the unix socket at
// socket.
func overUnixSocket(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// Pods asks the node's API for its pods.
func (n *Node) Pods(ctx context.Context) ([]corev1.Pod, error) {
	hc := overUnixSocket(n.path("staticpod.sock"))
	hc.Timeout = 5 * time.Second
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://staticpod/pods", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /pods: %s", resp.Status)
	}
	var list corev1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// LogTail is the end of the daemon's log, for errors.
func (n *Node) LogTail() string {
	data, _ := os.ReadFile(n.path("staticpod.log"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// Pod is the manifest of a pod with one container that runs script.
func Pod(name, script string, hostNetwork bool) string {
	host := ""
	if hostNetwork {
		host = "  hostNetwork: true\n"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 5
%s  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, name, host, Image, script)
}

// Stopper is what the benchmark pods run: nothing for an hour, and an exit as soon as
// SIGTERM comes (a shell waiting on a child it started runs its trap at once; PID 1
// has no default action for SIGTERM), so that no removal waits out a grace period.
const Stopper = "trap 'exit 0' TERM; sleep 3600 & wait"

// Containers is how many containers the node's namespace holds.
func (n *Node) Containers(ctx context.Context) (int, error) {
	cs, err := n.d.Client.Containers(namespaces.WithNamespace(ctx, n.Name))
	return len(cs), err
}

// RemovePrefixed removes the manifests whose names begin with prefix and waits until
// the namespace holds left containers.
func (n *Node) RemovePrefixed(ctx context.Context, prefix string, left int) error {
	entries, err := os.ReadDir(n.Manifests)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			os.Remove(filepath.Join(n.Manifests, e.Name()))
		}
	}
	return n.AwaitContainers(ctx, left, 3*time.Minute)
}
