package once

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/runner"
)

// Where runc and the cgroup driver keep what they make for a container, by namespace:
// runc's state under RuncStateDir/<ns>/<id>, and the default cgroup path /<ns>/<id>
// under CgroupDir.
const (
	RuncStateDir = "/run/containerd/runc"
	CgroupDir    = "/sys/fs/cgroup"
)

// cleanup removes every container and sandbox of the run with their files and logs,
// the namespace's images, leases and the namespace itself, what runc and the cgroups
// keep of it, the containerd once started, and the directories once created.
func (j *job) cleanup(ctx context.Context) error {
	var errs []error
	if j.rt != nil {
		errs = append(errs, j.removeContainers(ctx), j.rt.PurgeNamespace(ctx))
		j.rt.Close()
	}
	if j.ctrd != nil {
		j.ctrd.Stop()
	}
	if j.ns != "" {
		RemoveHostState(j.ns)
	}
	for _, d := range j.temp {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// removeContainers removes the containers, then the sandboxes, then each pod's data.
func (j *job) removeContainers(ctx context.Context) error {
	all, err := j.rt.List(ctx)
	if err != nil {
		return err
	}
	sort.SliceStable(all, func(a, b int) bool {
		return all[a].Kind == runner.KindContainer && all[b].Kind == runner.KindSandbox
	})
	uids := map[types.UID]bool{}
	for _, p := range j.pods {
		uids[p.UID] = true
	}
	var errs []error
	for _, c := range all {
		errs = append(errs, j.rt.RemoveContainer(ctx, c.ID))
		uids[c.PodUID] = true
	}
	for uid := range uids {
		errs = append(errs, j.rt.RemovePodData(ctx, uid))
	}
	return errors.Join(errs...)
}

// RemoveHostState removes the directories runc and the cgroups keep for namespace ns,
// once they are empty (rmdir refuses the others). The cleanup calls it; so may whoever
// removes what `once --keep` left.
//
// runc's directory empties as the shims of the namespace finish deleting their
// containers, which containerd does not wait for: it is given hostStateWait.
func RemoveHostState(ns string) {
	dirs, _ := filepath.Glob(filepath.Join(CgroupDir, "*", ns))
	for _, d := range append(dirs, filepath.Join(CgroupDir, ns)) {
		_ = syscall.Rmdir(d)
	}
	runc := filepath.Join(RuncStateDir, ns)
	for deadline := time.Now().Add(hostStateWait); syscall.Rmdir(runc) == syscall.ENOTEMPTY && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}

// hostStateWait bounds the wait for runc's directory of a namespace to empty.
const hostStateWait = 5 * time.Second

// tellKept says where --keep left everything.
func (j *job) tellKept() {
	if j.rt != nil {
		j.rt.Close()
	}
	addr := j.c.String("containerd-address")
	fmt.Fprintf(j.errOut, "staticpod once: kept (--keep): containerd namespace %s (ctr -a %s -n %s containers ls), root dir %s, pod logs %s\n",
		j.ns, addr, j.ns, j.root, j.logDir)
	if j.ctrd != nil {
		fmt.Fprintf(j.errOut, "staticpod once: the containerd once started keeps running at %s\n", addr)
	}
}
