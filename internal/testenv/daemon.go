package testenv

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/staticpod/staticpod/internal/ctrd"
)

const (
	// containerdEnv names the containerd binary to run; default "containerd" on PATH.
	containerdEnv = "STATICPOD_TEST_CONTAINERD"

	startTimeout = 30 * time.Second // until the daemon answers Version
	stopTimeout  = 10 * time.Second // from SIGTERM to SIGKILL, and for each cleanup step
	purgeTimeout = 30 * time.Second // for the deletion of a namespace's containers
	pollInterval = 50 * time.Millisecond

	// maxSocketPath leaves room under the kernel's 108-byte limit for sun_path.
	maxSocketPath = 100
)

// Daemon is a private containerd: its root, state, sockets, config and log live in one
// temporary directory, and Stop leaves nothing of it behind.
type Daemon struct {
	Address string         // gRPC socket
	Client  *client.Client // connected; no default namespace
	LogPath string         // the daemon's stdout and stderr

	dir      string
	logLevel string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd.Wait returns

	mu    sync.Mutex // guards owned
	owned []string   // namespaces handed out by Namespace

	stopped  atomic.Bool // Stop was called
	stopOnce sync.Once
	stopErr  error // Stop's result, set once
}

// DaemonOptions change the daemon StartDaemonWith starts. The zero value is
// StartDaemon's.
type DaemonOptions struct {
	// RootSize, when not 0, puts the daemon's --root (its content store, snapshots and
	// metadata) on a tmpfs of that many bytes: a small image filesystem that a test can
	// fill.
	RootSize int64
	// StateOnTmpfs puts the daemon's --state (task bundles, shim sockets and runc's
	// state) on a tmpfs, as every installed containerd has it: /run/containerd. A
	// benchmark wants it so; on the disk, the bundles' directories and files compete with
	// everything else written there.
	StateOnTmpfs bool
	// LogLevel is the daemon's log level; "" is debug, which tests want when one fails.
	// A benchmark runs it as a user does, at info: at debug containerd and its shims
	// spend much of their time writing what they do.
	LogLevel string
}

// StartDaemon starts containerd ($STATICPOD_TEST_CONTAINERD, else containerd on PATH) in a
// new temporary directory and returns once it answers. Errors from a host that cannot run
// it (no containerd or runc, not root) wrap ErrUnavailable.
func StartDaemon(ctx context.Context) (*Daemon, error) {
	return StartDaemonWith(ctx, DaemonOptions{})
}

// StartDaemonWith is StartDaemon with options.
func StartDaemonWith(ctx context.Context, opts DaemonOptions) (*Daemon, error) {
	bin, err := checkHost()
	if err != nil {
		return nil, err
	}
	d, err := newDaemon()
	if err != nil {
		return nil, err
	}
	d.logLevel = opts.LogLevel
	err = d.mountRoot(opts.RootSize)
	if err == nil && opts.StateOnTmpfs {
		err = mountTmpfs(d.State(), "mode=0711")
	}
	if err != nil {
		return nil, errors.Join(err, unmountUnder(d.dir), d.removeDir())
	}
	if err := d.launch(bin); err != nil {
		return nil, errors.Join(err, unmountUnder(d.dir), d.removeDir())
	}
	if err := d.awaitServing(ctx); err != nil {
		err = fmt.Errorf("start containerd %s: %w\n%s", bin, err, d.LogTail(30))
		return nil, errors.Join(err, d.Stop(context.Background()))
	}
	return d, nil
}

// checkHost returns the containerd binary, or why this host cannot run it.
func checkHost() (string, error) {
	name := os.Getenv(containerdEnv)
	if name == "" {
		name = "containerd"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("find containerd: %w: install containerd or set %s: %w", err, containerdEnv, ErrUnavailable)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return "", fmt.Errorf("find runc: %w: %w", err, ErrUnavailable)
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("run containerd: tests must run as root: %w", ErrUnavailable)
	}
	return bin, nil
}

// newDaemon creates the daemon's directory, short enough for its socket paths.
func newDaemon() (*Daemon, error) {
	dir, err := os.MkdirTemp("", "sp-ctd-")
	if err == nil && len(dir) > maxSocketPath-len("/containerd.sock.ttrpc") {
		os.Remove(dir)
		dir, err = os.MkdirTemp("/tmp", "sp-ctd-")
	}
	if err != nil {
		return nil, fmt.Errorf("create containerd directory: %w", err)
	}
	// Searchable by all, as containerd's own /run/containerd is (0711): runc mounts a
	// container's root file system from its bundle there after it entered the
	// container's user namespace, whose root is no owner of this directory.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("create containerd directory: %w", err)
	}
	return &Daemon{
		Address: filepath.Join(dir, "containerd.sock"),
		LogPath: filepath.Join(dir, "containerd.log"),
		dir:     dir,
		exited:  make(chan struct{}),
	}, nil
}

// PID is the daemon's process ID.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Dir is the directory that holds everything of the daemon.
func (d *Daemon) Dir() string { return d.dir }

// FIFODir is where tests should create task I/O FIFOs (cio.WithFIFODir). Purging removes
// the FIFOs of the tasks it deletes wherever they are, but only FIFOs in FIFODir go away
// with a daemon that crashed; the default directory is /run/containerd/fifo.
func (d *Daemon) FIFODir() string { return filepath.Join(d.dir, "fifo") }

// DebugAddress is the daemon's debug socket, which serves /debug/pprof/.
func (d *Daemon) DebugAddress() string { return filepath.Join(d.dir, "debug.sock") }

// Root is the daemon's --root: content, metadata and snapshots.
func (d *Daemon) Root() string { return filepath.Join(d.dir, "root") }

// State is the daemon's --state: task bundles and their rootfs mounts.
func (d *Daemon) State() string { return filepath.Join(d.dir, "state") }

// mountRoot mounts a tmpfs of size bytes at Root, unless size is 0. Stop unmounts it
// with everything else under the daemon's directory.
func (d *Daemon) mountRoot(size int64) error {
	if size == 0 {
		return nil
	}
	return mountTmpfs(d.Root(), fmt.Sprintf("size=%d,mode=0711", size))
}

// MountTmpfs mounts a tmpfs with options data at dir, which it creates. UnmountUnder
// unmounts it.
func MountTmpfs(dir, data string) error { return mountTmpfs(dir, data) }

// mountTmpfs mounts a tmpfs with options data at dir, which it creates.
func mountTmpfs(dir, data string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, data); err != nil {
		return fmt.Errorf("mount a tmpfs (%s) at %s: %w", data, dir, err)
	}
	return nil
}

// config returns the daemon's configuration: everything under its directory.
func (d *Daemon) config() string {
	return ctrd.Config{
		Root: d.Root(), State: d.State(), Address: d.Address,
		Debug: d.DebugAddress(), LogLevel: cmp.Or(d.logLevel, "debug"),
	}.TOML()
}

// launch writes the config and starts the daemon with its output in LogPath. The daemon gets
// SIGKILL if the test binary dies first; its shims do not, and Stop kills them.
//
// Pdeathsig fires when the thread that forked the daemon exits, not the process, and a
// goroutine that locks its thread and returns makes Go end that thread. So the goroutine
// that starts the daemon keeps its thread locked until the daemon exits.
func (d *Daemon) launch(bin string) error {
	configPath := filepath.Join(d.dir, "config.toml")
	if err := os.WriteFile(configPath, []byte(d.config()), 0o600); err != nil {
		return fmt.Errorf("write containerd config: %w", err)
	}
	log, err := os.OpenFile(d.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644) // Resume appends
	if err != nil {
		return fmt.Errorf("create containerd log: %w", err)
	}
	defer log.Close() // the child holds its own descriptor
	d.cmd = exec.Command(bin, "--config", configPath)
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := d.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		d.cmd.Wait()
		close(d.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start containerd %s: %w", bin, err)
	}
	return nil
}

// awaitServing polls until the daemon answers Version, it exits, or startTimeout passes.
// Each attempt dials anew: a gRPC connection that failed once backs off for a second.
func (d *Daemon) awaitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	lastErr := errors.New("socket not created")
	for {
		if _, err := os.Stat(d.Address); err == nil {
			c, err := dial(ctx, d.Address)
			if err == nil {
				d.Client = c
				return nil
			}
			lastErr = err
		}
		select {
		case <-d.exited:
			return fmt.Errorf("containerd exited: %s", d.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("await containerd: %w (last error: %v)", ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

// dial connects to address and returns the client once the daemon answers Version.
func dial(ctx context.Context, address string) (*client.Client, error) {
	c, err := client.New(address, client.WithTimeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", address, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := c.Version(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("version %s: %w", address, err)
	}
	return c, nil
}

// Exited is closed when the daemon process has exited.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// running reports whether the daemon process has not exited.
func (d *Daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return d.cmd != nil
	}
}

// LogTail returns up to the last n lines of the daemon's log.
func (d *Daemon) LogTail(n int) string {
	data, err := os.ReadFile(d.LogPath)
	if err != nil {
		return fmt.Sprintf("(no containerd log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last %d lines of %s ---\n%s\n---", len(lines), d.LogPath, bytes.Join(lines, []byte("\n")))
}

// Halt stops the daemon process alone (SIGTERM, then SIGKILL after a while), as a
// supervisor restarting containerd does: its shims and their tasks, its root and its
// state stay, and Resume starts it again on them. Client is closed and nil until
// Resume. Halt and Resume must not run concurrently with the daemon's other methods.
func (d *Daemon) Halt() error {
	if d.Client != nil {
		d.Client.Close()
		d.Client = nil
	}
	return d.terminate()
}

// Resume starts the daemon that Halt stopped, on the same root, state and socket, and
// returns once it answers, with a new Client.
func (d *Daemon) Resume(ctx context.Context) error {
	if d.running() {
		return errors.New("resume containerd: it is running")
	}
	bin, err := checkHost()
	if err != nil {
		return err
	}
	d.exited = make(chan struct{})
	if err := d.launch(bin); err != nil {
		return err
	}
	if err := d.awaitServing(ctx); err != nil {
		return fmt.Errorf("resume containerd %s: %w\n%s", bin, err, d.LogTail(30))
	}
	return nil
}
