package containerdrt

import (
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// specInput is everything building one container's OCI spec needs. The runtime fills
// it from a runner.CreateRequest and from what it found in containerd (the image's
// config, where the sandbox's namespaces are) and on disk (the pod's directory). The spec builders
// (spec_*.go) read it and never do I/O beyond the pod directory they are given.
type specInput struct {
	Pod        *corev1.Pod
	Container  *corev1.Container
	Attempt    int                 // restart count of the container: names its termination log
	Image      ocispec.ImageConfig // the image's config: Env, Entrypoint, Cmd, WorkingDir, User, StopSignal
	SandboxNS  string              // directory of the sandbox's namespace files to join; "" for no sandbox
	SandboxID  string              // its container ID: the shim group of the pod's containers
	PodDir     string              // <root-dir>/pods/<uid>: emptyDirs, /etc files, termination logs
	PodIP      string              // the pod's IP as containers see it (127.0.0.1 on its own netns)
	HostIP     string              // the node's primary IP
	SeccompDir string              // directory of Localhost seccomp profiles
	Objects    manifests.Objects   // the ConfigMaps and Secrets of the pod's source
}
