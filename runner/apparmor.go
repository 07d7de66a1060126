package runner

import (
	"errors"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// ReasonAppArmor is the kubelet's reason for a pod it refuses because the pod asks for
// AppArmor confinement that the host cannot enforce; the message is "Cannot enforce
// AppArmor: " and why.
const ReasonAppArmor = "AppArmor"

// Host is what admission knows of the machine: probed once when staticpod starts, as
// the kubelet probes it once (enabling AppArmor takes a reboot, and a restart of either).
type Host struct {
	// AppArmor is nil when the host can enforce AppArmor profiles, else why not. The
	// zero Host checks nothing.
	AppArmor error
	// Node is the node the pods run on, for their admission by its labels, taints and
	// allocatable resources (runner/node); nil checks none of them.
	Node *corev1.Node
}

// ProbeHost looks at the machine staticpod runs on.
func ProbeHost() Host { return Host{AppArmor: appArmorEnabled("/sys")} }

// errAppArmorDisabled is the kubelet's words for a host without AppArmor.
var errAppArmorDisabled = errors.New("AppArmor is not enabled on the host")

// appArmorEnabled is the kubelet's check (runc's apparmor.IsEnabled) under the sysfs
// mounted at sys: the kernel's AppArmor module is enabled and its securityfs is there.
// Whether the runtime can load its default profile (apparmor_parser) is the runtime's
// question, asked when it creates a container, as containerd's CRI asks it.
func appArmorEnabled(sys string) error {
	if _, err := os.Stat(filepath.Join(sys, "kernel/security/apparmor")); err != nil {
		return errAppArmorDisabled
	}
	b, err := os.ReadFile(filepath.Join(sys, "module/apparmor/parameters/enabled"))
	if err != nil || len(b) < 2 || b[0] != 'Y' {
		return errAppArmorDisabled
	}
	return nil
}
