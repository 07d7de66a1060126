package cgroups

import (
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/plugins"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// Where each driver puts pod cgroups by default.
const (
	DefaultRoot        = "/staticpod"      // cgroupfs: /staticpod/<qos>/pod<uid>/<id>; /<namespace> in general
	DefaultSystemdRoot = "staticpod.slice" // systemd: staticpod-<qos>-pod<uid>.slice/staticpod-<id>.scope

	sliceSuffix = ".slice"
	scopePrefix = "staticpod" // systemd: staticpod-<container id>.scope
)

// Config places the pods' cgroups.
type Config struct {
	// Driver makes the cgroups; "" detects it from containerd's runc options
	// (see Detect).
	Driver Driver
	// Root is the parent of every pod cgroup: a path for cgroupfs, a slice for systemd;
	// "" is the driver's default.
	Root string
	// PodMaxPIDs caps the processes of each pod (its cgroup's pids.max, systemd's
	// TasksMax), as the kubelet's --pod-max-pids; 0 or less for no cap.
	PodMaxPIDs int64
}

// Pods lays out pod cgroups as the kubelet does: Guaranteed pods right under the
// root, Burstable and BestEffort ones under a cgroup of their class, each pod in a
// cgroup of its own, pod<uid>, and its containers (and sandbox) below that. A pod's
// usage and limits can then be read and capped as one.
type Pods struct {
	driver  Driver
	root    string
	maxPIDs int64 // each pod's; 0 for none
}

// New checks cfg and settles its defaults.
func New(cfg Config) (Pods, error) {
	c := Pods{driver: cfg.Driver, root: cfg.Root, maxPIDs: max(cfg.PodMaxPIDs, 0)}
	if c.driver == "" {
		c.driver = Cgroupfs
	}
	switch c.driver {
	case Cgroupfs:
		if c.root == "" {
			c.root = DefaultRoot
		}
		if !path.IsAbs(c.root) || strings.HasSuffix(c.root, sliceSuffix) {
			return c, fmt.Errorf("--cgroup-root %q: the cgroupfs driver takes an absolute path such as %s", c.root, DefaultRoot)
		}
		c.root = path.Clean(c.root)
	case Systemd:
		if c.root == "" {
			c.root = DefaultSystemdRoot
		}
		if !validSlice(c.root) {
			return c, fmt.Errorf("--cgroup-root %q: the systemd driver takes a slice such as %s", c.root, DefaultSystemdRoot)
		}
	default:
		return c, fmt.Errorf("cgroup driver %q: use systemd or cgroupfs", c.driver)
	}
	return c, nil
}

// Driver is the driver that makes the cgroups.
func (c Pods) Driver() Driver { return c.driver }

// Root is the parent of every pod cgroup: a path for cgroupfs, a slice for systemd.
func (c Pods) Root() string { return c.root }

// validSlice reports whether name is a slice name that can be a parent: "x.slice" or
// "x-y.slice", not the root slice "-.slice".
func validSlice(name string) bool {
	base, ok := strings.CutSuffix(name, sliceSuffix)
	return ok && base != "" && !strings.HasPrefix(base, "-") && !strings.HasSuffix(base, "-") &&
		!strings.Contains(base, "--") && !strings.ContainsAny(base, "/ ")
}

// qosName is the cgroup of a QoS class under the root; "" for Guaranteed, whose pods
// sit right under it.
func qosName(pod *corev1.Pod) string {
	switch manifests.QOSClass(pod) {
	case corev1.PodQOSBurstable:
		return "burstable"
	case corev1.PodQOSBestEffort:
		return "besteffort"
	}
	return ""
}

// Pod is the pod's cgroup, the parent of its containers': a path for cgroupfs, a slice
// for systemd.
func (c Pods) Pod(pod *corev1.Pod) string {
	return c.podIn(qosName(pod), pod.UID)
}

// podIn is the cgroup of the pod with the UID uid in the cgroup of a QoS class. A
// systemd slice name nests by dashes, so the UID's dashes become underscores, as the
// kubelet escapes them. The runtime never gets a UID that is not a plain token
// (manifests.CheckUID: podDir and List refuse them); should one come all the same, its
// hex encoding names the cgroup, which stays one entry of the QoS class's cgroup.
func (c Pods) podIn(qos string, uid types.UID) string {
	if manifests.CheckUID(uid) != nil {
		uid = types.UID(hex.EncodeToString([]byte(uid)))
	}
	name := "pod" + string(uid)
	if c.driver == Cgroupfs {
		return path.Join(c.root, qos, name)
	}
	parts := []string{strings.TrimSuffix(c.root, sliceSuffix)}
	if qos != "" {
		parts = append(parts, qos)
	}
	parts = append(parts, strings.ReplaceAll(name, "-", "_"))
	return strings.Join(parts, "-") + sliceSuffix
}

// qosClasses are the names qosName gives.
var qosClasses = []string{"", "burstable", "besteffort"}

// Container is the cgroupsPath of a container (or sandbox) with the ID id of pod, in
// the form runc takes for the driver: a path, or slice:prefix:name for systemd, which
// runc makes the scope staticpod-<id>.scope in the pod's slice.
func (c Pods) Container(pod *corev1.Pod, id string) string {
	return c.containerIn(c.Pod(pod), id)
}

// containerIn is the cgroupsPath of container id in the pod cgroup podCgroup (Pod).
func (c Pods) containerIn(podCgroup, id string) string {
	if c.driver == Cgroupfs {
		return path.Join(podCgroup, id)
	}
	return podCgroup + ":" + scopePrefix + ":" + id
}

// Dir is where a cgroupsPath of either form is in the cgroup filesystem, relative to a
// hierarchy's mount point: slices expanded by their dashes
// (a-b.slice -> /a.slice/a-b.slice), the scope named as runc names it.
func Dir(cgroupsPath string) string {
	slice, rest, systemd := strings.Cut(cgroupsPath, ":")
	if !systemd {
		return path.Clean("/" + cgroupsPath)
	}
	prefix, name, _ := strings.Cut(rest, ":")
	scope := name
	if prefix != "" {
		scope = prefix + "-" + name
	}
	if !strings.HasSuffix(scope, sliceSuffix) {
		scope += ".scope"
	}
	return path.Join(expandSlice(slice), scope)
}

// expandSlice is the path of a slice under the cgroup root: "" and "-.slice" are the
// root itself.
func expandSlice(slice string) string {
	base := strings.TrimSuffix(slice, sliceSuffix)
	if base == "" || base == "-" {
		return "/"
	}
	dir := "/"
	for i := range len(base) {
		if base[i] == '-' {
			dir = path.Join(dir, base[:i]+sliceSuffix)
		}
	}
	return path.Join(dir, slice)
}

// systemdStopTimeout is the annotation runc turns into the TimeoutStopUSec property of
// a container's scope. systemd stops the scopes itself when the machine shuts down
// without staticpod having stopped the pods first (staticpod gone, or logind's delay
// over): with the pod's grace period the shutdown waits that long, not systemd's
// default 90 s, for a container that ignores SIGTERM.
const systemdStopTimeout = "org.systemd.property.TimeoutStopUSec"

// Opts are the spec and container options of container id's cgroup in the pod cgroup
// podCgroup (Pod): the cgroupsPath, and for systemd runc's SystemdCgroup option (which
// every task of the container inherits) and the scope's stop timeout, the pod's grace
// period of graceSeconds (GraceSeconds).
func (c Pods) Opts(podCgroup, id string, graceSeconds int64) ([]oci.SpecOpts, []client.NewContainerOpts) {
	specOpts := []oci.SpecOpts{oci.WithCgroup(c.containerIn(podCgroup, id))}
	if c.driver != Systemd {
		return specOpts, nil
	}
	usec := strconv.FormatInt(max(graceSeconds, 1)*1_000_000, 10)
	specOpts = append(specOpts, oci.WithAnnotations(map[string]string{systemdStopTimeout: "uint64 " + usec}))
	return specOpts, []client.NewContainerOpts{client.WithRuntime(plugins.RuntimeRuncV2, &options.Options{SystemdCgroup: true})}
}

// GraceSeconds is the pod's termination grace period in seconds, the API's default
// when unset.
func GraceSeconds(pod *corev1.Pod) int64 {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// PodDir is where the pod's cgroup is in the cgroup filesystem, relative to a
// hierarchy's mount point (as Dir): its usage counts every container's and the
// sandbox's.
func (c Pods) PodDir(pod *corev1.Pod) string {
	return c.DirOf(c.Pod(pod))
}

// DirOf is where the pod cgroup podCgroup (Pod) is in the cgroup filesystem, as PodDir.
func (c Pods) DirOf(podCgroup string) string {
	if c.driver == Cgroupfs {
		return path.Clean("/" + podCgroup)
	}
	return expandSlice(podCgroup)
}
