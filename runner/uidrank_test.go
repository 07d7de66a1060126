package runner

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpod/staticpod/manifests"
)

// etcdRuns is the file pod etcd as its containers' labels tell it after a restart.
var etcdRuns = RunningPod{Namespace: "default", Name: "etcd", Source: "file", Location: "/m/etcd.yaml"}

// A UID whose containers run goes to the pod they are of, never to a pod that copied
// its UID and name from another source or file, whatever came first after a restart;
// while the running pod's source is unread, no other pod gets it; once that source no
// longer wants it, the other may.
func TestConfigGivesARunningUIDOnlyToItsOwnPod(t *testing.T) {
	orig := func() *corev1.Pod { return uidPod(sharedUID, "etcd", "file", "/m/etcd.yaml") }
	pushed := func() *corev1.Pod { return uidPod(sharedUID, "etcd", "api", "evil") }
	fileCopy := func() *corev1.Pod { return uidPod(sharedUID, "etcd", "file", "/m/a-copy.yaml") } // sorts first
	legacy := etcdRuns
	legacy.Location = ""
	type step struct {
		source string
		pods   []*corev1.Pod
	}
	for _, tc := range []struct {
		name    string
		running RunningPod
		listed  int // steps merged before the runtime was listed; then Merge
		steps   []step
		want    string // who holds the UID, "" for nobody
		holder  string // what the refused pod's error names
	}{
		{"a push copying UID and name, merged before the file pod",
			etcdRuns, 2, []step{{"api", []*corev1.Pod{pushed()}}, {"file", []*corev1.Pod{orig()}}},
			"default/etcd from /m/etcd.yaml", "from file /m/etcd.yaml"},
		{"the same, with containers that do not record their location",
			legacy, 2, []step{{"api", []*corev1.Pod{pushed()}}, {"file", []*corev1.Pod{orig()}}},
			"default/etcd from /m/etcd.yaml", "from file /m/etcd.yaml"},
		{"a second file with the same UID and name, sorting first",
			etcdRuns, 0, []step{{"file", []*corev1.Pod{fileCopy(), orig()}}},
			"default/etcd from /m/etcd.yaml", "from file /m/etcd.yaml"},
		{"the push alone, before the file source was read",
			etcdRuns, 0, []step{{"api", []*corev1.Pod{pushed()}}},
			"", "pod default/etcd from file /m/etcd.yaml (running)"},
		{"the push alone, listed after it came",
			etcdRuns, 1, []step{{"api", []*corev1.Pod{pushed()}}},
			"", "pod default/etcd from file /m/etcd.yaml (running)"},
		{"the file source read without the pod that runs",
			etcdRuns, 0, []step{{"api", []*corev1.Pod{pushed()}}, {"file", nil}},
			"default/etcd from evil", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConfig()
			listed := func() {
				c.Running = func(uid types.UID) (RunningPod, bool) { return tc.running, uid == sharedUID }
			}
			var desired map[types.UID]*corev1.Pod
			var conflicts []Conflict
			for i, s := range tc.steps {
				if i == tc.listed {
					listed()
				}
				desired, conflicts = c.Apply(manifests.Update{Source: s.source, Pods: s.pods})
			}
			if tc.listed == len(tc.steps) {
				listed()
				desired, conflicts = c.Merge()
			}
			want := map[types.UID]string{}
			if tc.want != "" {
				want[sharedUID] = tc.want
			}
			if diff := cmp.Diff(want, kept(desired)); diff != "" {
				t.Errorf("desired (-want +got):\n%s", diff)
			}
			if tc.holder == "" {
				if len(conflicts) != 0 {
					t.Errorf("conflicts %v, want none", conflicts)
				}
				return
			}
			if len(conflicts) != 1 || conflicts[0].Err.Field != "metadata.uid" || !strings.Contains(conflicts[0].Error(), tc.holder) {
				t.Errorf("conflicts %v; want one at metadata.uid naming %s", conflicts, tc.holder)
			}
		})
	}
}

// copyOf is a pod pushed as "evil" that copies pod's UID and name, with a command of
// its own.
func copyOf(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	evil := testPod(t, "etcd", "echo pwned", corev1.RestartPolicyAlways)
	evil.UID, evil.Name, evil.Spec.HostNetwork = pod.UID, pod.Name, pod.Spec.HostNetwork
	evil.Annotations[manifests.AnnotationSource], evil.Annotations[manifests.AnnotationLocation] = "api", "evil"
	return evil
}

// runningFilePod is etcd from etcd.yaml, of UID sharedUID, whose container runs in f as
// a staticpod that stopped left it.
func runningFilePod(t *testing.T, f *fakeRuntime) *corev1.Pod {
	pod := testPod(t, "etcd", "sleep 3600", corev1.RestartPolicyAlways)
	pod.UID, pod.Spec.HostNetwork = sharedUID, true // no sandbox to adopt
	f.put(Container{ID: "old", Kind: KindContainer, PodUID: sharedUID, PodName: pod.Name, PodNamespace: pod.Namespace,
		Name: "c", Hash: manifests.ContainerHash(&pod.Spec.Containers[0]), State: StateRunning, PID: 42,
		Source: "file", Location: manifests.LocationOf(pod)})
	return pod
}

// copiedUID is a loop after a restart: etcd from etcd.yaml runs under sharedUID
// (runningFilePod), a pushed manifest copies its UID and name (copyOf), and the workers
// the loop starts are collected instead of run.
type copiedUID struct {
	h             *harness
	l             *loop
	spawned       []*worker
	filePod, evil *corev1.Pod
}

func newCopiedUID(t *testing.T) *copiedUID {
	c := &copiedUID{h: newHarness(t)}
	c.l = newLoop(c.h.r, &sync.WaitGroup{})
	c.l.spawn = func(_ context.Context, w *worker) { c.spawned = append(c.spawned, w) }
	c.filePod = runningFilePod(t, c.h.f)
	c.evil = copyOf(t, c.filePod)
	return c
}

// A restarted staticpod adopts the file pod that runs under a UID, untouched, when a
// pushed manifest copies its UID and name: whether the push store, the runtime's first
// listing or the file source comes first, no worker ever runs the pushed spec.
func TestLoopAfterARestartKeepsAUIDForThePodThatRuns(t *testing.T) {
	for _, order := range [][]string{{"api", "file", "relist"}, {"api", "relist", "file"}, {"relist", "api", "file"}} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			c := newCopiedUID(t)
			h, l, filePod, evil := c.h, c.l, c.filePod, c.evil
			for _, step := range order {
				switch step {
				case "api":
					l.apply(h.ctx, manifests.Update{Source: "api", Pods: []*corev1.Pod{evil}})
				case "file":
					l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{filePod}})
				case "relist":
					res, err := h.r.pleg.Relist(h.ctx)
					l.relisted(h.ctx, relistDone{res, err})
				}
			}
			for _, w := range c.spawned {
				if w.pod == nil || manifests.SourceOf(w.pod) != "file" {
					t.Fatalf("a worker for %s runs under the file pod's UID; want the file pod's alone", describe(w))
				}
			}
			if len(c.spawned) != 1 {
				t.Fatalf("%d workers; want one, for the file pod", len(c.spawned))
			}
			h.sync(c.spawned[0])
			if n := h.f.count("CreateContainer") + h.f.count("StopContainer"); n != 0 {
				t.Errorf("%d creates and stops; the running pod must be adopted untouched", n)
			}
			var refused []string
			for _, e := range h.r.events.All() {
				if e.Reason == "PodConflict" {
					refused = append(refused, e.Message)
				}
			}
			if len(refused) == 0 || !strings.HasPrefix(refused[len(refused)-1], "evil: metadata.uid") {
				t.Errorf("PodConflict events %q; want the push refused at metadata.uid", refused)
			}
		})
	}
}

func describe(w *worker) string {
	if w.pod == nil {
		return "no pod (a removal)"
	}
	return manifests.Key(w.pod) + " from " + manifests.LocationOf(w.pod)
}

// When the pod that had a UID is no longer wanted and another pod (another source)
// takes the UID, the other starts only once the old pod's containers and data are
// removed: it never adopts them, never runs beside them, never sees its directory.
// Both when staticpod restarted meanwhile and when it ran throughout.
func TestLoopHandsAUIDOverOnlyOnceTheOldPodAndItsDataAreGone(t *testing.T) {
	for _, restarted := range []bool{true, false} {
		name := "while staticpod ran"
		if restarted {
			name = "after a restart"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			l := newLoop(h.r, &sync.WaitGroup{})
			var spawned []*worker
			l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
			relist := func() {
				res, err := h.r.pleg.Relist(h.ctx)
				l.relisted(h.ctx, relistDone{res, err})
			}
			filePod := runningFilePod(t, h.f)
			evil := copyOf(t, filePod)
			if restarted {
				relist()
				l.apply(h.ctx, manifests.Update{Source: "api", Pods: []*corev1.Pod{evil}})
				l.apply(h.ctx, manifests.Update{Source: "file"}) // the manifest moved out meanwhile
			} else {
				l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{filePod}})
				relist()
				l.apply(h.ctx, manifests.Update{Source: "api", Pods: []*corev1.Pod{evil}})
				l.apply(h.ctx, manifests.Update{Source: "file"}) // the manifest moved out
			}
			if len(spawned) != 1 || !spawned[0].killed() || spawned[0].pod != nil && manifests.SourceOf(spawned[0].pod) != "file" {
				t.Fatalf("workers %d, the first for %s (killed %v); want one, removing the file pod", len(spawned), describe(spawned[0]), spawned[0].killed())
			}
			for i := 0; !h.sync(spawned[0]); i++ {
				if i == 5 {
					t.Fatal("the old pod is never removed")
				}
				if len(spawned) != 1 {
					t.Fatal("the pushed pod started while the old one was being removed")
				}
			}
			l.workerGone(h.ctx, sharedUID)
			relist()
			if len(spawned) != 2 || spawned[1].pod == nil || manifests.LocationOf(spawned[1].pod) != "evil" {
				t.Fatalf("workers %d after the old pod went; want the pushed pod's to start", len(spawned))
			}
			h.sync(spawned[1])
			calls := h.f.callsOf()
			removed, created := slices.Index(calls, "RemovePodData"), slices.Index(calls, "CreateContainer")
			if removed < 0 || created < removed {
				t.Errorf("calls %v; want the old pod's data removed before the new pod's first container", calls)
			}
			if got := h.f.byName(sharedUID); len(got) != 1 || got["c/0"].ID == "old" || got["c/0"].Location != "evil" {
				t.Errorf("containers of the UID %v; want the pushed pod's alone", got)
			}
		})
	}
}

// The PLEG fills its cache before the loop hears of the relist. A file pod's merge that
// began before the first relist knew nothing of what runs, and kept the push that came
// first; want, a moment later, met the filled cache and started removing the running
// file pod to hand its UID to the push. Pods of a merge made before the first relist
// wait for the merge the relist brings.
func TestLoopActsOnNoMergeMadeBeforeTheFirstRelist(t *testing.T) {
	c := newCopiedUID(t)
	h, l, filePod := c.h, c.l, c.filePod
	l.apply(h.ctx, manifests.Update{Source: "api", Pods: []*corev1.Pod{c.evil}})
	var res []Event
	var err error
	relisted := false
	l.config.Running = func(types.UID) (RunningPod, bool) {
		if !relisted { // the first relist lands while the file source's merge runs
			relisted = true
			res, err = h.r.pleg.Relist(h.ctx)
		}
		return RunningPod{}, false // as the merge saw it: nothing listed yet
	}
	l.apply(h.ctx, manifests.Update{Source: "file", Pods: []*corev1.Pod{filePod}})
	l.config.Running = l.runningAs
	if !relisted {
		t.Fatal("the merge never asked what runs")
	}
	for _, w := range c.spawned {
		t.Errorf("a worker for %s started from the merge made before the first relist", describe(w))
	}
	l.relisted(h.ctx, relistDone{res, err})
	if len(c.spawned) != 1 || c.spawned[0].pod == nil || manifests.SourceOf(c.spawned[0].pod) != "file" {
		t.Fatalf("%d workers after the first relist; want one, for the file pod", len(c.spawned))
	}
	h.sync(c.spawned[0])
	if n := h.f.count("CreateContainer") + h.f.count("StopContainer"); n != 0 {
		t.Errorf("%d creates and stops; the running pod must be adopted untouched", n)
	}
}
