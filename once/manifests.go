package once

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/watcher"
)

// loadPods reads the manifests at paths for node with watcher.Scan, the daemon's own
// loader: the paths in order as one source, their ConfigMaps and Secrets readable by the
// pods of every path, a pod or object defined twice an error in the later file. Nothing
// may run when any is invalid: every problem is printed, located, and it returns an
// exit of 1.
func loadPods(errOut io.Writer, paths []string, node string) ([]*corev1.Pod, manifests.Objects, error) {
	for _, path := range paths {
		if _, err := os.Stat(path); err != nil {
			return nil, manifests.NewObjects(), cli.Exit(fmt.Sprintf("once: %v", err), spcli.ExitUsage)
		}
	}
	snap, err := watcher.Scan(paths, node)
	if err != nil {
		return nil, manifests.NewObjects(), cli.Exit(fmt.Sprintf("once: %v", err), spcli.ExitUsage)
	}
	objs := snap.Objects()
	var pods []*corev1.Pod
	var problems []string
	uids := map[types.UID]*corev1.Pod{} // the pod that has each UID
	for _, f := range snap.Files {
		if f.ReadErr != nil {
			problems = append(problems, f.ReadErr.Error())
		}
		for _, p := range f.Result.Errors {
			problems = append(problems, p.Error())
		}
		for _, p := range f.Result.Warnings {
			fmt.Fprintf(errOut, "warning: %s\n", p.Error())
		}
		for _, pod := range f.Result.Pods {
			if holder, ok := uids[pod.UID]; ok {
				problems = append(problems, f.Path+": "+manifests.UIDTaken(pod.UID, manifests.Origin(holder)).Error())
				continue
			}
			uids[pod.UID] = pod
			pods = append(pods, pod)
		}
	}
	for _, c := range snap.Conflicts {
		problems = append(problems, c.Error())
	}
	for _, p := range problems {
		fmt.Fprintf(errOut, "error: %s\n", p)
	}
	if len(problems) > 0 {
		return nil, objs, cli.Exit(fmt.Sprintf("once: %s; nothing was run", spcli.Count(len(problems), "error")), spcli.ExitInvalid)
	}
	if len(pods) == 0 {
		return nil, objs, cli.Exit("once: no pods in "+strings.Join(paths, ", "), spcli.ExitInvalid)
	}
	return pods, objs, nil
}
