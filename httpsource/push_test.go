package httpsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/manifests"
)

// pushing is a Push under test with its Run going, and the snapshots it sends.
type pushing struct {
	*Push
	dir     string
	updates chan manifests.Update
	logs    *logRecorder
}

// mustRunPush opens a push store in dir and runs it until the test ends. It returns
// once the first snapshot, the stored one, has been received.
func mustRunPush(t *testing.T, dir string) (*pushing, manifests.Update) {
	t.Helper()
	logs := newLogRecorder()
	p, err := NewPush(dir, "node1", slog.New(logs))
	if err != nil {
		t.Fatalf("NewPush(%s) = %v", dir, err)
	}
	ps := &pushing{Push: p, dir: dir, updates: make(chan manifests.Update, 1000), logs: logs}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- p.Run(ctx, func(ctx context.Context, u manifests.Update) error {
			ps.updates <- u
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil on cancel", err)
		}
		if t.Failed() {
			t.Logf("push log:\n%s", logs)
		}
	})
	return ps, ps.awaitUpdate(t, "start")
}

func (ps *pushing) awaitUpdate(t *testing.T, what string) manifests.Update {
	t.Helper()
	return awaitUpdate(t, ps.updates, what)
}

// noUpdate runs act and asserts that it sent nothing. Run sends a snapshot for each
// wake-up, and Put and Delete wake it, or not, before they return: an act that sends
// nothing leaves the count of wake-ups as it was, and leaves nothing on its way.
func (ps *pushing) noUpdate(t *testing.T, what string, act func()) {
	t.Helper()
	before := ps.woken()
	act()
	if after := ps.woken(); after != before {
		t.Fatalf("%s woke the push source %d times, want none: it sends a snapshot for each", what, after-before)
	}
	select {
	case u := <-ps.updates:
		t.Fatalf("unexpected snapshot after %s: %v", what, podNames(u))
	default:
	}
}

// woken is how many times Put and Delete have woken Run.
func (ps *pushing) woken() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.wakes
}

func (ps *pushing) mustPut(t *testing.T, name, data string) manifests.Result {
	t.Helper()
	res, err := ps.Put(name, []byte(data))
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("Put(%s) = %v, %v; want it stored", name, res.Errors, err)
	}
	return res
}

// files lists the names in dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestPushStoresAValidManifest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	ps, first := mustRunPush(t, dir)
	if len(first.Pods) != 0 {
		t.Fatalf("first snapshot of an empty store = %v, want none", podNames(first))
	}
	data := pod("web", "busybox:1")
	ps.mustPut(t, "web", data)

	stored, err := os.ReadFile(filepath.Join(dir, "web.yaml"))
	if err != nil || string(stored) != data {
		t.Fatalf("web.yaml = %q, %v; want the pushed content", stored, err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, filepath.Join(dir, "web.yaml"): 0o600} {
		if info, err := os.Stat(path); err != nil || info.Mode() != want {
			t.Errorf("mode of %s = %v, %v; want %v", path, info.Mode(), err, want)
		}
	}
	u := ps.awaitUpdate(t, "Put")
	if diff := cmp.Diff([]string{"web-node1"}, podNames(u)); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
	if a := u.Pods[0].Annotations; a[manifests.AnnotationSource] != manifests.SourceAPI || a[manifests.AnnotationLocation] != "web" {
		t.Errorf("annotations = %v, want source api, location web", a)
	}
	if got, err := ps.Get("web"); err != nil || string(got) != data {
		t.Errorf("Get(web) = %q, %v; want the pushed content", got, err)
	}
	list := ps.List()
	if len(list) != 1 || list[0].Stored.IsZero() {
		t.Fatalf("List() = %v, want one manifest with its time", list)
	}
	if diff := cmp.Diff(Manifest{Name: "web", Pods: []string{"default/web-node1"}}, list[0], cmpIgnoreTime); diff != "" {
		t.Errorf("List()[0] (-want +got):\n%s", diff)
	}
	ps.noUpdate(t, "the same content pushed again", func() { ps.mustPut(t, "web", data) })
}

var cmpIgnoreTime = cmp.Comparer(func(a, b time.Time) bool { return true })

func TestPushRefusesAnInvalidManifest(t *testing.T) {
	dir := t.TempDir()
	ps, _ := mustRunPush(t, dir)
	res, err := ps.Put("web", []byte(pod("web", "")+"---\nkind: Deployment\n"))
	if err != nil {
		t.Fatalf("Put(invalid) error = %v, want nil with the problems in the Result", err)
	}
	var fields []string
	for _, p := range res.Errors {
		fields = append(fields, fmt.Sprintf("%d %s", p.Doc, p.Field()))
	}
	if diff := cmp.Diff([]string{"1 spec.containers[0].image", "2 kind"}, fields); diff != "" {
		t.Errorf("errors (-want +got):\n%s\n%v", diff, res.Errors)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Errorf("files after an invalid Put = %v, want none", got)
	}
	if _, err := ps.Get("web"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(web) = %v, want ErrNotFound", err)
	}
	// The refusal is told to the runner (as the other sources tell theirs), with the
	// same pods as before.
	u := ps.awaitUpdate(t, "an invalid Put")
	if len(u.Pods) != 0 || len(u.Failures) != 1 || u.Failures[0].Location != "web" || !u.Failures[0].Invalid || len(u.Failures[0].Problems) != 2 {
		t.Errorf("after an invalid Put: pods %v, failures %+v; want no pod and the refusal of web with its 2 problems", podNames(u), u.Failures)
	}
	ps.mustPut(t, "web", pod("web", "busybox:1"))
	if u := ps.awaitUpdate(t, "a valid Put"); len(u.Pods) != 1 || len(u.Failures) != 0 {
		t.Errorf("after a valid Put: pods %v, failures %+v; want web and no failure", podNames(u), u.Failures)
	}
}

func TestPushRefusesBadNames(t *testing.T) {
	dir := t.TempDir()
	ps, _ := mustRunPush(t, dir)
	ps.noUpdate(t, "bad names", func() {
		for _, name := range []string{"../x", "A", "a/b", "", ".", "..", "a.b", "-a", "a-", "web.yaml", strings.Repeat("a", 64)} {
			if _, err := ps.Put(name, []byte(pod("web", "busybox:1"))); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Put(%q) = %v, want ErrInvalidName", name, err)
			}
			if err := ps.Delete(name); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Delete(%q) = %v, want ErrInvalidName", name, err)
			}
			if _, err := ps.Get(name); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Get(%q) = %v, want ErrInvalidName", name, err)
			}
		}
	})
	if got := files(t, dir); len(got) != 0 {
		t.Errorf("files = %v, want none", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x.yaml")); err == nil {
		t.Errorf("a file was written outside the store")
	}
}

func TestPushRefusesAPodOfAnotherManifest(t *testing.T) {
	ps, _ := mustRunPush(t, t.TempDir())
	ps.mustPut(t, "a", pod("web", "busybox:1"))
	ps.awaitUpdate(t, "Put a")
	res, err := ps.Put("b", []byte(pod("web", "busybox:2")))
	if err != nil || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), `pushed manifest "a"`) {
		t.Fatalf("Put(b) = %v, %v; want one error naming manifest a", res.Errors, err)
	}
	if u := ps.awaitUpdate(t, "the refused Put b"); len(u.Failures) != 1 || u.Failures[0].Location != "b" {
		t.Errorf("after the refused Put b: failures %+v, want b's", u.Failures)
	}
	ps.mustPut(t, "a", pod("web", "busybox:2")) // a manifest may change its own pods
	if got := images(ps.awaitUpdate(t, "Put a again")); !cmp.Equal(got, []string{"busybox:2"}) {
		t.Errorf("images = %v, want busybox:2", got)
	}
}

func TestPushDeleteRemovesTheManifest(t *testing.T) {
	dir := t.TempDir()
	ps, _ := mustRunPush(t, dir)
	ps.mustPut(t, "web", pod("web", "busybox:1"))
	ps.awaitUpdate(t, "Put")
	if err := ps.Delete("web"); err != nil {
		t.Fatalf("Delete(web) = %v", err)
	}
	if u := ps.awaitUpdate(t, "Delete"); len(u.Pods) != 0 {
		t.Errorf("snapshot after Delete = %v, want none", podNames(u))
	}
	if got := files(t, dir); len(got) != 0 {
		t.Errorf("files after Delete = %v, want none", got)
	}
	if err := ps.Delete("web"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete(web) again = %v, want ErrNotFound", err)
	}
	if len(ps.List()) != 0 {
		t.Errorf("List() = %v, want empty", ps.List())
	}
}

func TestPushLoadsStoredManifestsAtRestart(t *testing.T) {
	dir := t.TempDir()
	ps, _ := mustRunPush(t, dir)
	ps.mustPut(t, "web", pod("web", "busybox:1"))
	ps.mustPut(t, "db", pod("db", "busybox:1")+"---\n"+pod("cache", "busybox:1"))
	var before manifests.Update
	for len(before.Pods) < 3 {
		before = ps.awaitUpdate(t, "two Puts")
	}

	again, after := mustRunPush(t, dir)
	if diff := cmp.Diff(before.Pods, after.Pods); diff != "" {
		t.Errorf("pods after a restart (-before +after):\n%s", diff)
	}
	var names []string
	for _, m := range again.List() {
		names = append(names, m.Name)
	}
	if diff := cmp.Diff([]string{"db", "web"}, names); diff != "" {
		t.Errorf("List() after a restart (-want +got):\n%s", diff)
	}
}

func TestPushSkipsLeftoversAndBrokenFilesAtLoad(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"web.yaml":                pod("web", "busybox:1"),
		".web.yaml.123456.tmp":    pod("web", "busy"), // a write cut short by a crash
		"broken.yaml":             pod("broken", ""),  // hand-edited since
		"README":                  "not a manifest",
		"Upper.yaml":              pod("upper", "busybox:1"),
		".api.yaml.987654321.tmp": "",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ps, first := mustRunPush(t, dir)
	if diff := cmp.Diff([]string{"web-node1"}, podNames(first)); diff != "" {
		t.Errorf("loaded pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"README", "Upper.yaml", "broken.yaml", "web.yaml"}, files(t, dir)); diff != "" {
		t.Errorf("files after load (-want +got); temp files should be gone:\n%s", diff)
	}
	if !strings.Contains(ps.logs.String(), "broken: spec.containers[0].image") {
		t.Errorf("the broken manifest was not logged with its located error:\n%s", ps.logs)
	}
	if err := ps.Delete("broken"); err != nil {
		t.Errorf("Delete(broken) = %v, want a file that did not load removed", err)
	}
}

func TestPushIsSafeForConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	ps, _ := mustRunPush(t, dir)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			name := fmt.Sprintf("p%d", i)
			for j := range 5 {
				if _, err := ps.Put(name, []byte(pod(name, fmt.Sprintf("busybox:%d", j)))); err != nil {
					t.Errorf("Put(%s) = %v", name, err)
				}
				ps.Put("shared", []byte(pod("shared", fmt.Sprintf("busybox:%d", i))))
				ps.List()
			}
			if i%2 == 0 {
				if err := ps.Delete(name); err != nil {
					t.Errorf("Delete(%s) = %v", name, err)
				}
			}
		})
	}
	wg.Wait()
	var want []string
	for i := 1; i < 16; i += 2 {
		want = append(want, fmt.Sprintf("p%d-node1", i))
	}
	want = append(want, "shared-node1")
	sort.Strings(want)
	var got []string
	for !cmp.Equal(got, want) {
		got = podNames(ps.awaitUpdate(t, "concurrent Puts"))
		sort.Strings(got)
	}
	if diff := cmp.Diff(append([]string{}, mapNames(want)...), files(t, dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// mapNames turns static pod names into the files of their manifests.
func mapNames(pods []string) []string {
	var out []string
	for _, p := range pods {
		out = append(out, strings.TrimSuffix(p, "-node1")+".yaml")
	}
	sort.Strings(out)
	return out
}
