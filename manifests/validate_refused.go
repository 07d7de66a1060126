package manifests

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Fields a cluster accepts that staticpod does not implement (yet). Each used to be
// accepted and then ignored, so that a pod asking for more isolation, a label or a
// gate silently ran without it. They are refused here with the field named, why, and
// what to do instead; the field contract (contract*.go) lists them all.

const (
	msgReadinessGates = "readiness gates are set by controllers through an apiserver, which static pods do not have, so the pod would never be Ready; " +
		"remove readinessGates and let a readinessProbe decide instead"
	msgSchedulingGates = "scheduling gates are removed by controllers through an apiserver, which static pods do not have, and a static pod is never scheduled; " +
		"remove schedulingGates instead"
	msgPodHugePages = "huge pages in pod-level resources are not applied by staticpod; " +
		"set them on each container's resources instead"
	msgOverhead = "overhead is set from the pod's RuntimeClass (its overhead.podFixed), as an apiserver's admission sets it; " +
		"remove overhead, or name a RuntimeClass that sets it in runtimeClassName, instead"
	msgHostnameFQDN = "setHostnameAsFQDN is not implemented by staticpod; " +
		"remove it and set hostnameOverride to the fully qualified name instead"
	msgWindows = "staticpod runs Linux containers only, and the kubelet refuses a pod whose OS is not its node's; " +
		"set os.name to linux, or remove os, instead"
	msgStdin = "nothing attaches to a container's stdin in staticpod (there is no apiserver to attach through), so the container would read end-of-file at once; " +
		"remove stdin and use `staticpod exec -it` for an interactive shell instead"
	msgGRPCTLS = "gRPC probes over TLS are not implemented by staticpod; " +
		"remove mode (or set it to Plaintext), or probe with an exec handler instead"
	msgHTTP2Probe = "HTTP/2 probes are not implemented by staticpod; " +
		"remove protocol (or set it to HTTP1) instead"
)

// msgAlpha is the refusal of an alpha field of Kubernetes (behind a feature gate that
// is off by default) that staticpod does not implement.
func msgAlpha(gate string) string {
	return fmt.Sprintf("this alpha field of Kubernetes (feature gate %s) is not implemented by staticpod; remove it instead", gate)
}

// Feature gates of the alpha fields refused by msgAlpha.
const (
	gateEmptyDirMode  = "EmptyDirVolumeMode"
	gateVolumeUser    = "AtomicWriteVolumeUserFields"
	gateBindMountOpts = "VolumeBindMountOptions"
)

// validateRefused refuses the fields staticpod does not implement.
func validateRefused(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(set bool, p *field.Path, msg string) {
		if set {
			errs = append(errs, field.Forbidden(p, msg))
		}
	}
	forbid(len(spec.ReadinessGates) > 0, fld.Child("readinessGates"), msgReadinessGates)
	forbid(len(spec.SchedulingGates) > 0, fld.Child("schedulingGates"), msgSchedulingGates)
	forbid(len(spec.Overhead) > 0 && spec.RuntimeClassName == nil, fld.Child("overhead"), msgOverhead) // else References checks it
	forbid(spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN, fld.Child("setHostnameAsFQDN"), msgHostnameFQDN)
	forbid(spec.OS != nil && spec.OS.Name == corev1.Windows, fld.Child("os"), msgWindows)
	for i := range spec.Volumes {
		errs = append(errs, refusedInVolume(&spec.Volumes[i].VolumeSource, fld.Child("volumes").Index(i))...)
	}
	for i := range spec.InitContainers {
		errs = append(errs, refusedInContainer(&spec.InitContainers[i], fld.Child("initContainers").Index(i))...)
	}
	for i := range spec.Containers {
		errs = append(errs, refusedInContainer(&spec.Containers[i], fld.Child("containers").Index(i))...)
	}
	return errs
}

func refusedInContainer(c *corev1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Stdin {
		errs = append(errs, field.Forbidden(fld.Child("stdin"), msgStdin))
	}
	for i, m := range c.VolumeMounts {
		if len(m.BindMountOptions) > 0 {
			errs = append(errs, field.Forbidden(fld.Child("volumeMounts").Index(i).Child("bindMountOptions"), msgAlpha(gateBindMountOpts)))
		}
	}
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
		if pr.probe == nil {
			continue
		}
		p := fld.Child(pr.name)
		if g := pr.probe.GRPC; g != nil && g.Mode != nil && *g.Mode == corev1.GRPCProbeModeTLS {
			errs = append(errs, field.Forbidden(p.Child("grpc", "mode"), msgGRPCTLS))
		}
		errs = append(errs, refusedInHTTPGet(pr.probe.HTTPGet, p.Child("httpGet"))...)
	}
	if lc := c.Lifecycle; lc != nil {
		if h := lc.PostStart; h != nil {
			errs = append(errs, refusedInHTTPGet(h.HTTPGet, fld.Child("lifecycle", "postStart", "httpGet"))...)
		}
		if h := lc.PreStop; h != nil {
			errs = append(errs, refusedInHTTPGet(h.HTTPGet, fld.Child("lifecycle", "preStop", "httpGet"))...)
		}
	}
	return errs
}

func refusedInHTTPGet(h *corev1.HTTPGetAction, fld *field.Path) field.ErrorList {
	if h == nil || h.Protocol == nil || *h.Protocol == corev1.HTTPProtocolHTTP1 {
		return nil
	}
	return field.ErrorList{field.Forbidden(fld.Child("protocol"), msgHTTP2Probe)}
}

// refusedInVolume refuses the alpha fields of the volume sources staticpod mounts.
func refusedInVolume(src *corev1.VolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	user := func(set bool, p *field.Path) {
		if set {
			errs = append(errs, field.Forbidden(p, msgAlpha(gateVolumeUser)))
		}
	}
	items := func(items []corev1.KeyToPath, p *field.Path) {
		for i, it := range items {
			user(it.User != nil, p.Index(i).Child("user"))
		}
	}
	downward := func(items []corev1.DownwardAPIVolumeFile, p *field.Path) {
		for i, it := range items {
			user(it.User != nil, p.Index(i).Child("user"))
		}
	}
	switch {
	case src.EmptyDir != nil && src.EmptyDir.Mode != nil:
		errs = append(errs, field.Forbidden(fld.Child("emptyDir", "mode"), msgAlpha(gateEmptyDirMode)))
	case src.Secret != nil:
		user(src.Secret.DefaultUser != nil, fld.Child("secret", "defaultUser"))
		items(src.Secret.Items, fld.Child("secret", "items"))
	case src.ConfigMap != nil:
		user(src.ConfigMap.DefaultUser != nil, fld.Child("configMap", "defaultUser"))
		items(src.ConfigMap.Items, fld.Child("configMap", "items"))
	case src.DownwardAPI != nil:
		user(src.DownwardAPI.DefaultUser != nil, fld.Child("downwardAPI", "defaultUser"))
		downward(src.DownwardAPI.Items, fld.Child("downwardAPI", "items"))
	case src.Projected != nil:
		p := fld.Child("projected")
		user(src.Projected.DefaultUser != nil, p.Child("defaultUser"))
		for i, s := range src.Projected.Sources {
			sp := p.Child("sources").Index(i)
			switch {
			case s.Secret != nil:
				items(s.Secret.Items, sp.Child("secret", "items"))
			case s.ConfigMap != nil:
				items(s.ConfigMap.Items, sp.Child("configMap", "items"))
			case s.DownwardAPI != nil:
				downward(s.DownwardAPI.Items, sp.Child("downwardAPI", "items"))
			}
		}
	}
	return errs
}
