package spec

import (
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/devices"
)

// Input is everything building one container's OCI spec needs. The runtime fills it
// from a runner.CreateRequest, from what it found in containerd (the image's config,
// where the sandbox's namespaces are) and from what the pod directory's preparation
// made (Prepared). The builders read it and write nothing.
type Input struct {
	Pod       *corev1.Pod
	Container *corev1.Container
	Attempt   int                 // restart count of the container: names its termination log
	Image     ocispec.ImageConfig // the image's config: Env, Entrypoint, Cmd, WorkingDir, User, StopSignal
	// ImageUserFiles is a directory holding the image's /etc/passwd and /etc/group (those
	// it has) at etc/passwd and etc/group, where the user and its groups are looked up;
	// "" has the lookups read them from the container's snapshot, mounted for the
	// purpose.
	ImageUserFiles string
	SandboxNS      string // directory of the sandbox's namespace files to join; "" for no sandbox
	SandboxID      string // its container ID: the shim group of the pod's containers
	// UserNSHostID is the host's first ID of the pod's user namespace (hostUsers:
	// false), whose 65536 IDs from 0 it maps; 0 for the host's user namespace. The
	// sandbox holds the namespace, as the file "user" in SandboxNS.
	UserNSHostID uint32
	PodDir       string // <root-dir>/pods/<uid>: its file system is the pod's ephemeral storage
	// RunDir is <run-dir>/pods/<uid>: the pod's files that last no longer than the
	// machine's boot (its /etc files, /dev/shm, termination logs); PodDir for a pod
	// laid out before they moved there.
	RunDir     string
	PodIP      string // the pod's IP as containers see it (127.0.0.1 on its own netns)
	HostIP     string // the node's primary IP
	SeccompDir string // directory of Localhost seccomp profiles
	// AppArmorProfile is the loaded AppArmor profile the process runs under, "" for
	// none: AppArmorProfile decides it, the runtime loads it before the spec is built.
	AppArmorProfile string
	Objects         manifests.Objects // the ConfigMaps and Secrets of the pod's source
	// ImageVolumes are the host directories where the images of the image volumes the
	// container mounts are mounted read-only, by volume name.
	ImageVolumes map[string]string
	Prepared     Prepared // the host side of the container's mounts
	// CDIDevices are the fully-qualified CDI devices the container gets (the pod's
	// cdi.k8s.io/ annotations', see manifests.CDIDevices), applied from CDI, the
	// registry of CDI specs as the runtime last read it.
	CDIDevices []string
	CDI        *cdi.Cache
	// Devices are what device plugins allocated to the container; DeviceNodes its
	// device nodes as the runtime found them on the host (PluginDevices).
	Devices     devices.Allocation
	DeviceNodes []DeviceNode
}

// Prepared is the host side of one container's mounts, as the pod directory's
// preparation (poddir.PrepareContainer) made it before the spec is built.
type Prepared struct {
	Hostname string   // the pod's hostname, as its /etc/hostname holds it: the container's HOSTNAME
	Volumes  []Source // the bind source of each of Container.VolumeMounts, by index

	// The pod's /etc files, bound at /etc/hosts, /etc/hostname and /etc/resolv.conf
	// where the container mounts no volume of its own.
	EtcHosts, EtcHostname, ResolvConf string
	// TerminationLog is the host file of the termination message of this attempt,
	// bound at terminationMessagePath; "" for none.
	TerminationLog string
	// Shm is the host directory bound at /dev/shm: the host's with hostIPC, the pod's
	// tmpfs in a sandbox's IPC namespace; "" keeps the container's private tmpfs.
	Shm string
}

// Source is the host side of one volumeMount.
type Source struct {
	Path     string // the hostPath, the volume's directory or the subPath's mount point, symlinks resolved
	ReadOnly bool   // read-only whatever the mount says: downwardAPI, configMap, secret, projected and image volumes
}
