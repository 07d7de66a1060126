package manifests

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

const annApp = corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app"

func withAppArmor(pod *corev1.Pod, podP, appP *corev1.AppArmorProfile, ann string) *corev1.Pod {
	pod.Spec.SecurityContext.AppArmorProfile = podP
	if appP != nil {
		pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: appP}
	}
	if ann != "" {
		pod.Annotations = map[string]string{annApp: ann}
	}
	return pod
}

var (
	aaDefault    = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	aaUnconfined = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	aaLocal      = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: new("k8s-web")}
)

// TestAppArmorProfileFallsBackAsTheKubelet: the container's field first, then the
// deprecated annotation, then the pod's field.
func TestAppArmorProfileFallsBackAsTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		name         string
		podP, appP   *corev1.AppArmorProfile
		ann          string
		want         *corev1.AppArmorProfile
		wantRequired bool
	}{
		{"none", nil, nil, "", nil, false},
		{"pod's", aaDefault, nil, "", aaDefault, true},
		{"container's over pod's", aaDefault, aaUnconfined, "", aaUnconfined, true},
		{"annotation over pod's", aaUnconfined, nil, "localhost/k8s-web", aaLocal, true},
		{"container's over annotation", nil, aaDefault, "localhost/k8s-web", aaDefault, true},
		{"annotation runtime/default", nil, nil, "runtime/default", aaDefault, true},
		{"annotation unconfined", nil, nil, "unconfined", aaUnconfined, false},
		{"unknown annotation: pod's", aaDefault, nil, "docker/default", aaDefault, true},
		{"unconfined everywhere", aaUnconfined, aaUnconfined, "", aaUnconfined, false},
	} {
		pod := withAppArmor(validPod(), tc.podP, tc.appP, tc.ann)
		if got := AppArmorProfile(pod, &pod.Spec.Containers[0]); !cmp.Equal(got, tc.want) {
			t.Errorf("AppArmorProfile(%s) = %v, want %v", tc.name, got, tc.want)
		}
		if got := AppArmorRequired(pod); got != tc.wantRequired {
			t.Errorf("AppArmorRequired(%s) = %v, want %v", tc.name, got, tc.wantRequired)
		}
	}
}

func TestValidateAppArmorAnnotations(t *testing.T) {
	const key = "metadata.annotations[" + annApp + "]"
	runValidateCases(t, validPod, []validateCase{
		{"runtime/default", func(p *corev1.Pod) { withAppArmor(p, nil, nil, "runtime/default") }, nil},
		{"localhost profile agreeing with the field", func(p *corev1.Pod) { withAppArmor(p, nil, aaLocal, "localhost/k8s-web") }, nil},
		{"unknown value", func(p *corev1.Pod) { withAppArmor(p, nil, nil, "docker/default") }, []fieldErr{errAt(tInvalid, key)}},
		{"empty localhost profile", func(p *corev1.Pod) { withAppArmor(p, nil, nil, "localhost/ ") }, []fieldErr{errAt(tInvalid, key)}},
		{"no such container", func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "db": "runtime/default"}
		}, []fieldErr{errAt(tInvalid, "metadata.annotations["+corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"db]")}},
		{"type differs from the pod's field", func(p *corev1.Pod) { withAppArmor(p, aaUnconfined, nil, "runtime/default") },
			[]fieldErr{errAt(tForbidden, "spec.containers[0].securityContext.appArmorProfile.type")}},
		{"profile differs from the container's field", func(p *corev1.Pod) { withAppArmor(p, nil, aaLocal, "localhost/other") },
			[]fieldErr{errAt(tForbidden, "spec.containers[0].securityContext.appArmorProfile.localhostProfile")}},
	})
}
