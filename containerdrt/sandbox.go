package containerdrt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/pins"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/runner"
)

// sandboxBinary is where the staticpod binary sits inside the sandbox's root, which
// holds nothing else but the mount points runc needs.
const sandboxBinary = "/staticpod"

var sandboxMountPoints = []string{"proc", "dev", "sys", "run", "tmp", "etc"}

// sandboxRoot returns the sandboxes' root file system, installed by the first call
// (after an upgrade of staticpod, the new binary replaces the old one there) and by
// every call after one that failed.
func (r *Runtime) sandboxRoot() (string, error) {
	dir := filepath.Join(r.cfg.RootDir, sandboxDir)
	r.rootMu.Lock()
	defer r.rootMu.Unlock()
	if !r.rootInstalled {
		if err := installSandboxRoot(r.cfg.Self, dir); err != nil {
			return "", err
		}
		r.rootInstalled = true
	}
	return filepath.Join(dir, "rootfs"), nil
}

// installSandboxRoot prepares the sandbox's root: a directory holding only the
// staticpod binary (a hard link to it, or a copy). It is replaced by rename, so that a
// running sandbox keeps the binary it started with when staticpod is upgraded.
func installSandboxRoot(self, dir string) error {
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range sandboxMountPoints {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return fmt.Errorf("sandbox root: %w", err)
		}
	}
	dst := filepath.Join(rootfs, sandboxBinary)
	if same, err := sameContent(self, dst); err != nil || same {
		return err
	}
	// A hard link shares the page cache with the running binary, so every sandbox
	// costs only its private memory; a copy is the fallback across filesystems.
	link := filepath.Join(rootfs, ".staticpod-link")
	os.Remove(link)
	if err := os.Link(self, link); err == nil {
		return os.Rename(link, dst)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("sandbox root: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(rootfs, ".staticpod-")
	if err != nil {
		return fmt.Errorf("sandbox root: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("sandbox root: copy %s: %w", self, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("sandbox root: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("sandbox root: %w", err)
	}
	return os.Rename(tmp.Name(), dst)
}

func sameContent(a, b string) (bool, error) {
	hb, err := fileHash(b)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ha, err := fileHash(a)
	if err != nil {
		return false, fmt.Errorf("sandbox root: %w", err)
	}
	return bytes.Equal(ha, hb), nil
}

func fileHash(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// StartSandbox makes what holds pod's namespaces for its containers to join, from the
// pod read once (planSandbox). Most pods get pinned namespaces and no process
// (startPinnedSandbox); a pod that shares one PID namespace between its containers
// gets a process, staticpod's own "pause", which is that namespace's init
// (startPauseSandbox). No image is involved either way. The pod's runtime handler
// (from objs, the objects of its source) must be known: the pause process runs under
// it, and a pod whose handler is unknown gets no sandbox, as on the kubelet. Either
// kind pins its network namespace; its pod network, if there is one, is then set up
// there, and a failure removes the sandbox again.
func (r *Runtime) StartSandbox(ctx context.Context, pod *corev1.Pod, cfg runner.PodConfig, attempt int) (runner.Container, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	id := sandboxID(pod, attempt)
	p, err := r.planSandbox(ctx, pod, cfg, id, attempt)
	if err != nil {
		return runner.Container{}, err
	}
	var info containers.Container // a pinned sandbox's record
	var abandon func()            // removes what a failed sandbox left
	if p.pod.SharesPID {
		var c client.Container
		c, err = r.startPauseSandbox(ctx, id, p)
		abandon = func() { r.abandonSandbox(ctx, c, r.pinDir(id)) }
	} else {
		info, err = r.startPinnedSandbox(ctx, id, p)
		abandon = func() { r.abandonPinned(ctx, id, r.pinDir(id)) }
	}
	if err != nil {
		return runner.Container{}, err
	}
	if p.netw != nil {
		if err := r.attachNetwork(ctx, id, p.netw); err != nil {
			abandon()
			return runner.Container{}, fmt.Errorf("start sandbox %s: %w", id, err)
		}
	} else if !p.pod.SharesPID {
		return r.container(info, nil) // as recorded: nothing has changed it since
	}
	return r.inspect(ctx, id)
}

// startPinnedSandbox pins new network, UTS and IPC namespaces for sandbox id of plan p
// (the host's IPC namespace with hostIPC) and records the sandbox as a containerd
// container without a task, and returns the record. The record's labels name the pod,
// as any sandbox's do, and it is running for as long as its pins hold (see
// settlePinned). The record is made first, so that pins never exist without one that
// leads to them. A failure removes everything again.
//
// The record is written straight into containerd's container store: it references no
// image, snapshot or content, so the lease the client's NewContainer takes around a
// creation (two more writes of containerd's database) protects nothing here.
func (r *Runtime) startPinnedSandbox(ctx context.Context, id string, p sandboxPlan) (containers.Container, error) {
	spec := pins.Spec{Namespaces: []pins.Namespace{pins.Net, pins.UTS}, Hostname: p.pod.Hostname, UserNS: p.pod.UserNS}
	if !p.hostIPC {
		spec.Namespaces = append(spec.Namespaces, pins.IPC)
	}
	if spec.UserNS != 0 {
		spec.Namespaces, spec.Self = append([]pins.Namespace{pins.User}, spec.Namespaces...), r.cfg.Self
	}
	dir := r.pinDir(id)
	labels := p.labels
	labels[labelPinned] = dir
	var files []string
	for _, ns := range spec.Namespaces {
		files = append(files, ns.File)
	}
	labels[labelPinnedFiles] = strings.Join(files, ",")
	labels[labelStartedAt] = time.Now().UTC().Format(time.RFC3339Nano)
	info := containers.Container{ID: id, Labels: labels, Runtime: containers.RuntimeInfo{Name: r.defaultRuntime}}
	if info.Runtime.Name == "" {
		info.Runtime.Name = r.client.Runtime()
	}
	s, err := oci.GenerateSpec(ctx, r.client, &info, pinnedSpec(dir, spec)...)
	if err != nil {
		return containers.Container{}, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	if info.Spec, err = typeurl.MarshalAny(s); err != nil {
		return containers.Container{}, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	r.pinMu.Lock()
	created, err := r.client.ContainerService().Create(ctx, info)
	if err != nil {
		r.pinMu.Unlock()
		return containers.Container{}, fmt.Errorf("create sandbox %s: %w", id, convertErr(err))
	}
	err = pins.Pin(dir, spec)
	r.pinMu.Unlock()
	if err != nil {
		r.abandonPinned(ctx, id, dir)
		return containers.Container{}, fmt.Errorf("start sandbox %s: %w", id, err)
	}
	return created, nil
}

// abandonPinned removes a pinned sandbox that failed to start: its record and its pins.
func (r *Runtime) abandonPinned(ctx context.Context, id, dir string) {
	if err := r.client.ContainerService().Delete(ctx, id); ignoreNotFound(convertErr(err)) != nil {
		r.log.Warn("delete sandbox that failed to start", "id", id, "err", err)
	}
	r.pinMu.Lock()
	defer r.pinMu.Unlock()
	if err := pins.Unpin(dir); err != nil {
		r.log.Warn("unpin the namespaces of a sandbox that failed to start", "id", id, "err", err)
	}
}

// abandonSandbox removes a sandbox that failed to start: its task, its record, its
// pins. A sandbox that never ran holds nothing worth keeping.
func (r *Runtime) abandonSandbox(ctx context.Context, c client.Container, dir string) {
	if task, err := c.Task(ctx, nil); err == nil {
		if err := deleteTask(ctx, c, task); err != nil {
			r.log.Warn("delete the task of a sandbox that failed to start", "id", c.ID(), "err", err)
		}
	}
	if err := c.Delete(ctx); ignoreNotFound(convertErr(err)) != nil {
		r.log.Warn("delete sandbox that failed to start", "id", c.ID(), "err", err)
	}
	r.pinMu.Lock()
	defer r.pinMu.Unlock()
	if err := pins.Unpin(dir); err != nil {
		r.log.Warn("unpin the namespaces of a sandbox that failed to start", "id", c.ID(), "err", err)
	}
}

// pinnedSpec is the spec a pinned sandbox is recorded with. Nothing runs it; it says
// which namespaces the sandbox holds and where, for whoever inspects it with ctr.
func pinnedSpec(dir string, spec pins.Spec) []oci.SpecOpts {
	opts := []oci.SpecOpts{oci.WithHostname(spec.Hostname), oci.WithProcessArgs("/pinned-namespaces")}
	for _, ns := range spec.Namespaces {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specNamespace[ns.File], Path: filepath.Join(dir, ns.File)}))
	}
	return opts
}

// specNamespace is the OCI type of each namespace file.
var specNamespace = map[string]specs.LinuxNamespaceType{
	"net": specs.NetworkNamespace, "uts": specs.UTSNamespace, "ipc": specs.IPCNamespace, "pid": specs.PIDNamespace,
	"user": specs.UserNamespace,
}

// startPauseSandbox creates and starts sandbox id of plan p, a process: staticpod's
// "pause" in new network, IPC, UTS and PID namespaces (the host's where the pod asks
// for them), from the read-only sandbox root. With a pod network, its network
// namespace is pinned: a pod network is torn down in its namespace, which must outlive
// the process should it end first.
func (r *Runtime) startPauseSandbox(ctx context.Context, id string, p sandboxPlan) (client.Container, error) {
	own, err := spec.OwnOOMScoreAdj()
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	rootfs, err := r.sandboxRoot()
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	specOpts := append(append(sandboxSpec(p, rootfs, own), spec.ShimGroup(id)), p.run.spec...)
	if p.pod.UserNS != 0 {
		if err := checkSearchable(rootfs); err != nil {
			return nil, fmt.Errorf("create sandbox %s: %w", id, err)
		}
		// runc makes the user namespace from the mapping, and the sandbox's other new
		// namespaces inside it.
		m := spec.UserNSMapping(p.pod.UserNS)
		specOpts = append(specOpts, oci.WithUserNamespace(m, m))
	}
	c, err := r.client.NewContainer(ctx, id,
		append(p.run.opts, client.WithContainerLabels(p.labels), client.WithNewSpec(specOpts...))...,
	)
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, convertErr(err))
	}
	info, _ := c.Info(ctx, client.WithoutRefreshedMetadata) // as created: never fails without a refresh
	if err := r.startTask(ctx, info, cio.NullIO); err != nil {
		r.abandonSandbox(ctx, c, "")
		return nil, fmt.Errorf("start sandbox %s: %w", id, err)
	}
	if p.netw == nil {
		return c, nil
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return nil, convertErr(err)
	}
	dir := r.pinDir(id)
	r.pinMu.Lock()
	err = pins.PinProcess(task.Pid(), pins.Net, dir)
	r.pinMu.Unlock()
	if err != nil {
		r.abandonSandbox(ctx, c, dir)
		return nil, fmt.Errorf("start sandbox %s: %w", id, err)
	}
	return c, nil
}

// sandboxSpec is the OCI spec of a pod's sandbox process. Its OOM score is the
// kubelet's for a pod's sandbox, never below ownOOMScore (as spec.Resources scores
// containers): the kernel should kill it last of the pod, as its end takes the pod's
// namespaces.
func sandboxSpec(p sandboxPlan, rootfs string, ownOOMScore int) []oci.SpecOpts {
	opts := []oci.SpecOpts{
		spec.WithOOMScoreAdj(max(spec.SandboxOOMScoreAdj, ownOOMScore)),
		oci.WithRootFSPath(rootfs),
		oci.WithRootFSReadonly(),
		oci.WithProcessArgs(sandboxBinary, "pause"),
		oci.WithProcessCwd("/"),
		oci.WithEnv([]string{"PATH=/"}),
		oci.WithNoNewPrivileges,
	}
	if p.hostNetwork {
		// runc refuses a hostname without a UTS namespace of its own.
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace), oci.WithHostNamespace(specs.UTSNamespace))
	} else {
		opts = append(opts, oci.WithHostname(p.pod.Hostname))
	}
	if p.hostIPC {
		opts = append(opts, oci.WithHostNamespace(specs.IPCNamespace))
	}
	if p.hostPID {
		opts = append(opts, oci.WithHostNamespace(specs.PIDNamespace))
	}
	return opts
}
