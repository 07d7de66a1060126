package manifests

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Default values the apiserver gives a v1.Pod (k8s.io/kubernetes pkg/apis/core/v1
// defaults.go); staticpod applies the same so that a manifest means the same here as on
// a cluster, and so that status shows what the kubelet would show.
const (
	defaultGracePeriodSeconds = int64(corev1.DefaultTerminationGracePeriodSeconds)
	defaultProbeTimeout       = 1
	defaultProbePeriod        = 10
	defaultProbeSuccesses     = 1
	defaultProbeFailures      = 3
	defaultDownwardAPIMode    = corev1.DownwardAPIVolumeSourceDefaultMode
	defaultConfigMapMode      = corev1.ConfigMapVolumeSourceDefaultMode
	defaultSecretMode         = corev1.SecretVolumeSourceDefaultMode
	defaultProjectedMode      = corev1.ProjectedVolumeSourceDefaultMode
)

// Default fills in the fields the apiserver defaults on a v1.Pod. It changes pod in place
// and is idempotent.
func Default(pod *corev1.Pod) {
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	spec := &pod.Spec
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr(defaultGracePeriodSeconds)
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr(corev1.DefaultEnableServiceLinks)
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i], spec.HostNetwork)
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i], spec.HostNetwork)
	}
	defaultPodResources(pod)
}

// defaultPodResources defaults the pod-level requests as the apiserver does
// (defaultPodRequests), after the containers' own: where spec.resources sets limits,
// a resource it requests nothing of is requested at the containers' aggregate request
// of it, or, when no container requests it, at the pod-level limit.
func defaultPodResources(pod *corev1.Pod) {
	r := pod.Spec.Resources
	if r == nil {
		return
	}
	for _, l := range []corev1.ResourceList{r.Limits, r.Requests} {
		for name, q := range l {
			q.RoundUp(-3)
			l[name] = q
		}
	}
	if len(r.Limits) == 0 {
		return
	}
	reqs := r.Requests
	if reqs == nil {
		reqs = corev1.ResourceList{}
	}
	containers := ContainerRequests(pod)
	for name, q := range containers {
		if _, ok := reqs[name]; !ok && isCPUOrMemory(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	for name, q := range r.Limits {
		if _, ok := reqs[name]; !ok && (isCPUOrMemory(name) || isHugePages(name)) {
			reqs[name] = q.DeepCopy()
		}
	}
	if len(reqs) > 0 {
		r.Requests = reqs
	}
}

func defaultVolume(v *corev1.Volume) {
	src := &v.VolumeSource
	switch {
	case src.HostPath != nil:
		if src.HostPath.Type == nil {
			src.HostPath.Type = ptr(corev1.HostPathUnset)
		}
	case src.DownwardAPI != nil:
		if src.DownwardAPI.DefaultMode == nil {
			src.DownwardAPI.DefaultMode = ptr(int32(defaultDownwardAPIMode))
		}
		for i := range src.DownwardAPI.Items {
			defaultFieldRef(src.DownwardAPI.Items[i].FieldRef)
		}
	case src.ConfigMap != nil:
		if src.ConfigMap.DefaultMode == nil {
			src.ConfigMap.DefaultMode = ptr(int32(defaultConfigMapMode))
		}
	case src.Secret != nil:
		if src.Secret.DefaultMode == nil {
			src.Secret.DefaultMode = ptr(int32(defaultSecretMode))
		}
	case src.Projected != nil:
		if src.Projected.DefaultMode == nil {
			src.Projected.DefaultMode = ptr(int32(defaultProjectedMode))
		}
		for _, s := range src.Projected.Sources {
			if s.DownwardAPI != nil {
				for i := range s.DownwardAPI.Items {
					defaultFieldRef(s.DownwardAPI.Items[i].FieldRef)
				}
			}
		}
	case src.Image != nil:
		if src.Image.PullPolicy == "" {
			src.Image.PullPolicy = defaultPullPolicy(src.Image.Reference)
		}
	case *src == (corev1.VolumeSource{}):
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
}

// defaultPullPolicy is the pull policy of an image that names none, for a container's
// image as for an image volume's reference (the apiserver's SetDefaults_Container and
// SetDefaults_ImageVolumeSource): Always for the tag latest, which a reference without
// tag or digest means, IfNotPresent otherwise.
func defaultPullPolicy(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func defaultContainer(c *corev1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for i := range c.Env {
		if c.Env[i].ValueFrom != nil {
			defaultFieldRef(c.Env[i].ValueFrom.FieldRef)
		}
	}
	defaultResources(&c.Resources)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultResources rounds quantities up to milli scale and sets requests to limits where
// only limits are given, as the apiserver does for a Pod.
func defaultResources(r *corev1.ResourceRequirements) {
	for _, l := range []corev1.ResourceList{r.Limits, r.Requests} {
		for name, q := range l {
			q.RoundUp(-3)
			l[name] = q
		}
	}
	if len(r.Limits) == 0 {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = q.DeepCopy()
		}
	}
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = defaultProbeTimeout
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = defaultProbePeriod
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = defaultProbeSuccesses
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = defaultProbeFailures
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr("")
	}
}

func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

func defaultFieldRef(f *corev1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// imageTag returns the tag of an image reference, "latest" when it has neither tag nor
// digest, and "" when it is pinned by digest only.
func imageTag(image string) string {
	ref := image
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
		if !strings.Contains(ref[strings.LastIndexByte(ref, '/')+1:], ":") {
			return ""
		}
	}
	name := ref[strings.LastIndexByte(ref, '/')+1:] // a registry port is not a tag
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		return name[i+1:]
	}
	return "latest"
}

func ptr[T any](v T) *T { return &v }
