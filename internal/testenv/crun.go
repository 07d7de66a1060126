package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CrunBinary is Debian's crun, which .ci/run installs.
const CrunBinary = "/usr/bin/crun"

// CrunHandler is the --runtime-handler NAME=VALUE that runs crun under the name crun,
// with what it needs written into dir. crun refuses to run where the cgroup v1
// hierarchies have a cgroup2 beside them at /sys/fs/cgroup/unified that holds
// controllers ("cgroups in hybrid mode not supported": hugetlb is there on a host
// whose v1 does not mount it). There crun is run by a wrapper in dir, in a mount
// namespace of its own, a slave of the host's, without that cgroup2 mount; elsewhere
// it is crun itself. A host without crun is an error.
func CrunHandler(dir string) (string, error) {
	if _, err := os.Stat(CrunBinary); err != nil {
		return "", fmt.Errorf("crun (apt-get install crun): %w", err)
	}
	controllers, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if err != nil || strings.TrimSpace(string(controllers)) == "" {
		return "crun=" + CrunBinary, nil
	}
	wrapper := filepath.Join(dir, "crun")
	script := "#!/bin/sh\nexec unshare --mount --propagation slave sh -c 'umount -l /sys/fs/cgroup/unified && exec " +
		CrunBinary + " \"$@\"' crun \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("crun wrapper: %w", err)
	}
	return "crun=" + wrapper, nil
}
