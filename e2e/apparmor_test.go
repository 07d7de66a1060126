package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner"
)

// On a host without AppArmor, a pod asking for an AppArmor profile, in the field or in
// the deprecated annotation, is refused as the kubelet refuses it: Failed, reason
// AppArmor, "Cannot enforce AppArmor: AppArmor is not enabled on the host", an event,
// no container; a pod asking for Unconfined runs. (make vm-test proves the profiles
// applied on a host with AppArmor.)
func TestAppArmorRefusedWithoutAppArmor(t *testing.T) {
	if b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled"); err == nil && strings.HasPrefix(string(b), "Y") {
		t.Skip("this host has AppArmor: make vm-test proves its profiles applied")
	}
	n := newNode(t)
	n.start()
	n.write("field.yaml", podManifest("field", "Always", "sleep 3600", "  securityContext: {appArmorProfile: {type: RuntimeDefault}}\n"))
	n.write("annotated.yaml", strings.Replace(podManifest("annotated", "Always", "sleep 3600"),
		"  name: annotated\n", "  name: annotated\n  annotations: {container.apparmor.security.beta.kubernetes.io/main: localhost/k8s-web}\n", 1))
	n.write("unconfined.yaml", podManifest("unconfined", "Always", "sleep 3600", "  securityContext: {appArmorProfile: {type: Unconfined}}\n"))
	n.await("the Unconfined pod", time.Minute, running("unconfined-node1/main/0"))

	const want = "Cannot enforce AppArmor: AppArmor is not enabled on the host"
	api := []string{"--api-socket", n.path("staticpod.sock")}
	for _, name := range []string{"field-node1", "annotated-node1"} {
		p := n.awaitPhase(name, corev1.PodFailed)
		if p.Status.Reason != runner.ReasonAppArmor || p.Status.Message != want {
			t.Errorf("%s: reason %q, message %q; want %s, %q", name, p.Status.Reason, p.Status.Message, runner.ReasonAppArmor, want)
		}
		if out, _, _ := runSplit(t, "", nil, append([]string{"describe", name}, api...)...); !strings.Contains(out, "Warning  AppArmor") || !strings.Contains(out, want) {
			t.Errorf("describe %s does not say why it was refused:\n%s", name, out)
		}
	}
	if cs := n.containers(); len(cs) != 1 {
		t.Errorf("containers %v, want the Unconfined pod's only", fmt.Sprint(summary(cs)))
	}
}
