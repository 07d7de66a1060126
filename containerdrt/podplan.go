package containerdrt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/oci"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/containerdrt/cgroups"
	"github.com/staticpod/staticpod/containerdrt/poddir"
	"github.com/staticpod/staticpod/containerdrt/podnet"
	"github.com/staticpod/staticpod/containerdrt/spec"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// A pod is read once per sync, before anything of it is made in containerd:
// PreparePod resolves what the pod's sandbox and containers share (podConfig: its
// directory, user namespace, cgroup, runtime handler, hostname), as the kubelet
// resolves a pod's sandbox config once per sync. planSandbox and planContainer then
// read what each sandbox and container adds (IDs, network, labels), so that the
// sandbox kinds (sandbox.go) and CreateContainer (container.go) build from a plan, not
// the pod.

// podConfig resolves pod for its sandbox and containers: its directory and user
// namespace (allocated on first use), its cgroup, its runtime handler (from objs, the
// objects of its source: its RuntimeClass), its hostname, whether its containers share
// a PID namespace, the hash of what its sandbox is made from, and its start time.
func (r *Runtime) podConfig(pod *corev1.Pod, objs manifests.Objects) (runner.PodConfig, error) {
	var cfg runner.PodConfig
	var err error
	if cfg.Dir, cfg.UserNS, err = r.podDirAndUserNS(pod); err != nil {
		return cfg, err
	}
	cfg.RunDir = r.runDirOf(cfg.Dir)
	cfg.Cgroup = r.cgroup.Pod(pod)
	handler, class := manifests.RuntimeHandler(pod, objs)
	cfg.Handler = handler
	if class != nil {
		cfg.RuntimeClass = class.Name
	}
	cfg.Hostname, _ = poddir.Hostname(pod)
	cfg.SharesPID = manifests.SharesPIDNamespace(pod)
	cfg.SandboxHash = manifests.SandboxHash(pod)
	if st := pod.Status.StartTime; st != nil && !st.IsZero() {
		cfg.Start = runner.TimestampOf(st.Time)
	}
	return cfg, nil
}

// errNotPrepared is a sandbox or container asked for with no PodConfig: PreparePod
// was not called first.
var errNotPrepared = errors.New("the pod was not prepared (PreparePod) before it")

// sandboxPlan is what a pod's sandbox is made from; the sandbox's ID is the runtime's
// name for what is made (sandboxID), not part of the plan.
type sandboxPlan struct {
	// pod is what PreparePod resolved of the pod: with SharesPID, its containers share
	// a PID namespace of the pod's own, whose init is a sandbox process
	// (startPauseSandbox); else its namespaces are pinned. Its Hostname is its UTS
	// namespace's, its UserNS the first host ID of its user namespace (0: the host's).
	pod runner.PodConfig
	// The namespaces the pod shares with the host.
	hostNetwork, hostIPC, hostPID bool
	netw                          *podnet.Attachment
	// labels name the pod, hash what the sandbox is made from and say how it is
	// networked (sandboxLabels).
	labels map[string]string
	run    podRuntime // a sandbox process's cgroup and runtime handler
}

// planSandbox reads pod, as cfg resolved it, for its sandbox id of attempt. A pod whose
// runtime handler is unknown gets no sandbox, as on the kubelet.
func (r *Runtime) planSandbox(ctx context.Context, pod *corev1.Pod, cfg runner.PodConfig, id string, attempt int) (sandboxPlan, error) {
	p := sandboxPlan{
		pod: cfg, hostNetwork: pod.Spec.HostNetwork, hostIPC: pod.Spec.HostIPC, hostPID: pod.Spec.HostPID,
	}
	if cfg.Dir == "" {
		return p, fmt.Errorf("start sandbox %s: %w", id, errNotPrepared)
	}
	var err error
	if p.run, err = r.runtimeOf(pod, cfg, id); err != nil {
		return p, err
	}
	netw, note, err := r.net.ForPod(ctx, pod)
	if err != nil {
		return p, fmt.Errorf("start sandbox %s: %w", id, err)
	}
	p.netw = netw
	p.labels = sandboxLabels(pod, cfg, attempt, netw, note)
	return p, nil
}

// containerPlan is what one container of a pod is made from, but for its image and
// for what the pod directory prepares for it (see CreateContainer).
type containerPlan struct {
	in spec.Input
	// labels name the container and its pod and hold what List and a stop need (see
	// containerLabels), but for the image's stop signal.
	labels    map[string]string
	run       podRuntime
	podCgroup string // the pod's cgroup directory, the parent of the container's, whose OOM kills its labels count
}

// planContainer reads req's pod, as req.Config resolved it, for its container id: the
// sandbox's namespaces, the container's AppArmor profile (loaded if containerd's
// default), its devices (device plugins' nodes, CDI) and labels.
func (r *Runtime) planContainer(req runner.CreateRequest, id string) (containerPlan, error) {
	pod, c, cfg := req.Pod, req.Container, req.Config
	p := containerPlan{in: spec.Input{
		Pod: pod, Container: c, Attempt: req.Attempt, PodIP: r.podIP(pod, req.Sandbox), HostIP: r.cfg.HostIP,
		SeccompDir: r.cfg.SeccompDir, Objects: req.Objects, Devices: req.Devices,
		PodDir: cfg.Dir, RunDir: cfg.RunDir, UserNSHostID: cfg.UserNS,
	}, podCgroup: r.cgroup.DirOf(cfg.Cgroup)}
	if cfg.Dir == "" {
		return p, errNotPrepared
	}
	var err error
	if p.run, err = r.runtimeOf(pod, cfg, id); err != nil {
		return p, err
	}
	if req.Sandbox != nil {
		p.in.SandboxNS, p.in.SandboxID = r.sandboxNamespaces(req.Sandbox), req.Sandbox.ID
	}
	if p.in.UserNSHostID != 0 {
		if err := checkOwnUserNamespace(p.in.SandboxNS); err != nil {
			return p, err
		}
	}
	if p.in.AppArmorProfile, err = appArmorProfile(pod, c); err != nil {
		return p, err
	}
	if err := r.resolveDevices(&p.in); err != nil {
		return p, err
	}
	p.labels = containerLabels(pod, cfg, c, req.Attempt)
	p.labels[LabelHash] = req.Hash
	p.labels[LabelLogPath] = logFilePath(r.cfg.PodLogDir, pod, c.Name, req.Attempt)
	p.labels[LabelTermination] = poddir.TerminationLogPath(p.in.RunDir, c.Name, req.Attempt)
	p.labels[labelImageID] = req.Image.Digest
	if req.Sandbox != nil && req.Sandbox.PID == 0 {
		p.labels[labelSandbox] = req.Sandbox.ID // a pinned sandbox: see keepTask
	}
	return p, nil
}

// podIP is the pod's IP: the host's on the host network, else its sandbox's pod IP; ""
// for a pod with loopback only (no pod network is configured).
func (r *Runtime) podIP(pod *corev1.Pod, sandbox *runner.Container) string {
	switch {
	case pod.Spec.HostNetwork:
		return r.cfg.HostIP
	case sandbox != nil && len(sandbox.IPs) > 0:
		return sandbox.IPs[0]
	}
	return ""
}

// runtimeOf is what runs container (or sandbox process) id of pod: its cgroup and its
// runtime handler, as cfg resolved them. A handler that is not known fails, naming the
// field, as the kubelet fails the sandbox of a pod whose RuntimeClass or handler its
// runtime does not have.
func (r *Runtime) runtimeOf(pod *corev1.Pod, cfg runner.PodConfig, id string) (podRuntime, error) {
	cgroupSpec, cgroupOpts := r.cgroup.Opts(cfg.Cgroup, id, cgroups.GraceSeconds(pod))
	name := cfg.Handler
	if name == "" {
		return podRuntime{spec: cgroupSpec, opts: cgroupOpts}, nil
	}
	h, ok := r.handlers.Lookup(name)
	if !ok {
		known := strings.Join(r.handlers.Names(), ", ")
		if cfg.RuntimeClass != "" {
			return podRuntime{}, fmt.Errorf("spec.runtimeClassName: no runtime for %q is configured: RuntimeClass %s names handler %s, which is not one of this node's (%s); "+
				"add it with --runtime-handler %s=<OCI runtime binary or containerd runtime type>, or to containerd's CRI runtimes", name, cfg.RuntimeClass, name, known, name)
		}
		return podRuntime{}, fmt.Errorf("spec.runtimeClassName: no runtime for %q is configured: no RuntimeClass %s is defined beside the pod, and %s is not one of this node's runtime handlers (%s); "+
			"add a RuntimeClass document, or the handler with --runtime-handler %s=<OCI runtime binary or containerd runtime type>", name, name, name, known, name)
	}
	run := podRuntime{spec: append(cgroupSpec, h.SpecOpts()...), opts: cgroupOpts}
	if h.Type != "" {
		run.opts = h.Opts(r.cgroup.Driver() == cgroups.Systemd)
	}
	return run, nil
}

// podRuntime is what runs a container or a sandbox process: the spec options of its
// cgroup and runtime handler, and the container options that pick its runtime (the
// cgroup driver's, runc's SystemdCgroup under systemd, for the default handler; else
// the handler's, with the driver's SystemdCgroup for runc's shim).
type podRuntime struct {
	spec []oci.SpecOpts
	opts []client.NewContainerOpts
}

// containerd refuses IDs over 76 characters; readable IDs keep the pod name first and
// shorten it when needed, while the UID prefix keeps them unique.
const (
	maxIDLength = 76
	uidPrefix   = 8
)

// containerID is a readable, unique containerd ID for attempt of container in pod:
// "<pod name>_<container>_<attempt>_<uid prefix>". Pod and container names are DNS
// names, so the result always matches containerd's ID rules.
func containerID(pod *corev1.Pod, container string, attempt int) string {
	return makeID(pod.Name, container+"_"+strconv.Itoa(attempt), pod.UID)
}

// sandboxID is the ID of a pod's sandbox: "<pod name>_<attempt>_<uid prefix>"; one
// field fewer than a container's, so the two never collide.
func sandboxID(pod *corev1.Pod, attempt int) string {
	return makeID(pod.Name, strconv.Itoa(attempt), pod.UID)
}

func makeID(podName, rest string, uid types.UID) string {
	u := strings.NewReplacer("-", "", "_", "", ".", "").Replace(string(uid))
	if len(u) > uidPrefix {
		u = u[:uidPrefix]
	}
	if u == "" {
		u = "0"
	}
	tail := "_" + rest + "_" + u
	if room := maxIDLength - len(tail); len(podName) > room {
		podName = strings.TrimRight(podName[:room], "-.")
	}
	return podName + tail
}
