package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/internal/testenv"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// inproc is a runner and a containerd runtime in the test's own process, on a node's
// namespace: for tests that need the statuses the runner computes, without going
// through the daemon's API.
type inproc struct {
	n  *node
	r  *runner.Runner
	rt *containerdrt.Runtime
}

func startInProcess(t *testing.T, n *node) *inproc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(n.ctx))
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := containerdrt.New(ctx, containerdrt.Config{
		Address: n.d.Address, Namespace: n.ns, RootDir: n.path("root"), PodLogDir: n.path("log/pods"),
		Self: binary, FIFODir: n.d.FIFODir(), Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Options{Runtime: rt, Logger: log, RelistPeriod: e2eRelist, HostIP: rt.HostIP()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		rt.Close()
	})
	return &inproc{n: n, r: r, rt: rt}
}

type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// apply hands the runner the given manifests as the file source's snapshot.
func (p *inproc) apply(docs ...string) {
	p.n.t.Helper()
	var pods []*corev1.Pod
	for i, doc := range docs {
		res := manifests.Load([]byte(doc), manifests.Options{NodeName: e2eNode, Source: manifests.Source{Kind: manifests.SourceFile, Location: string(rune('a'+i)) + ".yaml"}})
		if len(res.Errors) > 0 {
			p.n.t.Fatalf("manifest %d: %v", i, res.Errors)
		}
		pods = append(pods, res.Pods...)
	}
	if err := p.r.Update(p.n.ctx, manifests.Update{Source: manifests.SourceFile, Pods: pods}); err != nil {
		p.n.t.Fatal(err)
	}
}

// awaitPod polls the runner's statuses until cond holds for the pod named name.
func (p *inproc) awaitPod(name, what string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	p.n.t.Helper()
	var found *corev1.Pod
	defer func() { // runs as a failed Await ends the test: show the statuses instead
		if found == nil {
			p.n.t.Logf("statuses: %s", describePods(p.r.Pods()))
		}
	}()
	testenv.Await(p.n.t, "pod "+name+" "+what, timeout, func() bool {
		for _, pod := range p.r.Pods() {
			if pod.Name == name && cond(pod) {
				found = pod
				return true
			}
		}
		return false
	})
	return found
}

// pod returns the runner's status of the pod named name.
func (p *inproc) pod(name string) *corev1.Pod {
	p.n.t.Helper()
	for _, pod := range p.r.Pods() {
		if pod.Name == name {
			return pod
		}
	}
	p.n.t.Fatalf("the runner has no pod %s; statuses: %s", name, describePods(p.r.Pods()))
	return nil
}

// awaitRelists waits until the runner has relisted count more times, each a chance for
// its workers to act: proof that time passed for a test that checks that something does
// not happen.
func (p *inproc) awaitRelists(count uint64) {
	p.n.t.Helper()
	from := p.r.Relists()
	testenv.Await(p.n.t, fmt.Sprintf("%d relists of the runner", count), time.Minute, func() bool {
		return p.r.Relists() >= from+count
	})
}

func describePods(pods []*corev1.Pod) string {
	var b strings.Builder
	for _, pod := range pods {
		b.WriteString(pod.Name + " " + string(pod.Status.Phase))
		for _, c := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			b.WriteString(" [" + c.Name)
			switch {
			case c.State.Running != nil:
				b.WriteString(" running")
			case c.State.Waiting != nil:
				b.WriteString(" waiting " + c.State.Waiting.Reason)
			case c.State.Terminated != nil:
				b.WriteString(" terminated " + c.State.Terminated.Reason)
			}
			if c.Ready {
				b.WriteString(" ready")
			}
			b.WriteString("]")
		}
		b.WriteString("; ")
	}
	return b.String()
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func containerStatus(pod *corev1.Pod, name string) corev1.ContainerStatus {
	for _, c := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if c.Name == name {
			return c
		}
	}
	return corev1.ContainerStatus{}
}
