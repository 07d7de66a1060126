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

// loadPods reads the manifests at paths for node, in order, with the ConfigMaps and
// Secrets they hold, which the pods of every path may read. Nothing may run when any is
// invalid: every problem is printed, located, and it returns an exit of 1.
func loadPods(errOut io.Writer, paths []string, node string) ([]*corev1.Pod, manifests.Objects, error) {
	var pods []*corev1.Pod
	var problems []string
	owner := map[string]string{}        // namespace/name -> the file that defines it
	uids := map[types.UID]*corev1.Pod{} // the pod that has each UID
	var snaps []watcher.Snapshot
	objs := manifests.NewObjects()
	for _, path := range paths {
		if _, err := os.Stat(path); err != nil {
			return nil, objs, cli.Exit(fmt.Sprintf("once: %v", err), spcli.ExitUsage)
		}
		snap, err := watcher.Read(path, node)
		if err != nil {
			return nil, objs, cli.Exit(fmt.Sprintf("once %s: %v", path, err), spcli.ExitUsage)
		}
		for _, f := range snap.Files {
			for _, ref := range objs.Add(f.Result.ConfigMaps, f.Result.Secrets) {
				problems = append(problems, fmt.Sprintf("%s: %s is already defined in an earlier path", f.Path, ref))
			}
		}
		snaps = append(snaps, snap)
	}
	for _, snap := range snaps {
		snap.Resolve(objs)
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
				key := manifests.Key(pod)
				if first, ok := owner[key]; ok {
					problems = append(problems, fmt.Sprintf("%s: pod %s is already defined in %s", f.Path, key, first))
					continue
				}
				if holder, ok := uids[pod.UID]; ok {
					problems = append(problems, f.Path+": "+manifests.UIDTaken(pod.UID, manifests.Origin(holder)).Error())
					continue
				}
				owner[key] = f.Path
				uids[pod.UID] = pod
				pods = append(pods, pod)
			}
		}
		for _, c := range snap.Conflicts {
			problems = append(problems, c.Error())
		}
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
