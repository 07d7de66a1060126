package containerdrt

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containerd/containerd/v2/contrib/apparmor"
	hostapparmor "github.com/containerd/containerd/v2/pkg/apparmor"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt/spec"
)

// appArmorProfiles lists the profiles the kernel has loaded, one a line:
// "name (mode)".
const appArmorProfiles = "/sys/kernel/security/apparmor/profiles"

// errAppArmorNotLoaded is how a container asking for a Localhost profile that is not
// loaded fails to be created, in containerd CRI's words; it is tried again with
// back-off, so loading the profile later lets it start.
var errAppArmorNotLoaded = errors.New("apparmor profile not found")

// appArmorProfile is the AppArmor profile container c of pod runs under ("" for none;
// see spec.AppArmorProfile), made ready before its spec is built, as containerd's CRI
// makes it ready: containerd's default profile is generated and loaded with
// apparmor_parser unless it is loaded already; a Localhost profile must be loaded.
// Whether the host can confine is containerd's answer (apparmor.HostSupports: AppArmor
// enabled and apparmor_parser present, outside a container).
func appArmorProfile(pod *corev1.Pod, c *corev1.Container) (string, error) {
	name, runtimeDefault, err := spec.AppArmorProfile(pod, c, hostapparmor.HostSupports())
	switch {
	case err != nil || name == "":
		return "", err
	case runtimeDefault:
		if err := apparmor.LoadDefaultProfile(name); err != nil {
			return "", fmt.Errorf("container %q: load AppArmor profile %s: %w", c.Name, name, err)
		}
		return name, nil
	}
	loaded, err := appArmorLoaded(appArmorProfiles, name)
	if err != nil {
		return "", fmt.Errorf("container %q: AppArmor profile %s: %w", c.Name, name, err)
	}
	if !loaded {
		return "", fmt.Errorf("container %q: %w %s: load it (apparmor_parser -r) before the pod starts", c.Name, errAppArmorNotLoaded, name)
	}
	return name, nil
}

// appArmorLoaded says whether the profiles file lists the profile name.
func appArmorLoaded(profiles, name string) (bool, error) {
	f, err := os.Open(profiles)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), name+" (") {
			return true, nil
		}
	}
	return false, sc.Err()
}
