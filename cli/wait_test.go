package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/apitest"
)

// waitPods are a Ready web-node1, a kube-system/etcd-node1 that is not Ready, and a
// job-node1 without a Ready condition.
func waitPods() []corev1.Pod {
	web := withCondition(statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(true)}), corev1.PodReady, true)
	etcd := withCondition(statusPod(corev1.PodRunning, []corev1.ContainerStatus{csRunning(false)}), corev1.PodReady, false)
	etcd.Name, etcd.Namespace = "etcd-node1", "kube-system"
	job := statusPod(corev1.PodPending, []corev1.ContainerStatus{csWaiting("main", "ContainerCreating")})
	job.Name = "job-node1"
	return []corev1.Pod{*web, *etcd, *job}
}

// fastWait makes wait poll every millisecond for the test.
func fastWait(t *testing.T) {
	old := waitPeriod
	waitPeriod = time.Millisecond
	t.Cleanup(func() { waitPeriod = old })
}

type waitResult struct {
	out, errOut string
	code        int
}

// startWait runs wait in the background; its result comes on the channel.
func startWait(t *testing.T, args ...string) <-chan waitResult {
	done := make(chan waitResult, 1)
	go func() {
		out, errOut, code := runCLI(t, append([]string{"wait"}, args...)...)
		done <- waitResult{out, errOut, code}
	}()
	return done
}

// awaitRequest returns once the fake has received the request asked stands for; a wait
// that ends first fails the test.
func awaitRequest(t *testing.T, asked <-chan struct{}, done <-chan waitResult) {
	t.Helper()
	select {
	case <-asked:
	case r := <-done:
		t.Fatalf("wait ended before the request the test waits for: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
}

func TestWaitForConditionMeetsItWhenThePodGetsThere(t *testing.T) {
	fastWait(t)
	d := apitest.NewServer(t, waitPods())
	listed := d.NextRequest("/pods")
	done := startWait(t, "--api-socket", d.Socket, "--for=condition=Ready", "kube-system/etcd-node1", "--timeout", "1m")
	awaitRequest(t, listed, done) // wait has seen etcd not Ready
	ready := waitPods()
	ready[1].Status.Conditions[0].Status = corev1.ConditionTrue
	d.SetPods(ready)
	if r := <-done; r.code != 0 || r.out != "pod/kube-system/etcd-node1 condition met\n" {
		t.Errorf("wait: exit %d, stdout %q, stderr %q; want 0 and condition met", r.code, r.out, r.errOut)
	}
}

func TestWaitExitsOneWithKubectlsMessageOnTimeout(t *testing.T) {
	fastWait(t)
	d := apitest.NewServer(t, waitPods())
	start := time.Now()
	out, errOut, code := runCLI(t, "wait", "--api-socket", d.Socket, "--for", "condition=Ready", "--timeout", "300ms", "web-node1", "kube-system/etcd-node1", "job-node1")
	want := "wait: timed out waiting for the condition on pods/kube-system/etcd-node1\n" +
		"wait: timed out waiting for the condition on pods/job-node1\n"
	if code != ExitInvalid || errOut != want || out != "pod/web-node1 condition met\n" {
		t.Errorf("wait on pods never Ready: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and:\n%s", code, out, errOut, want)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("wait gave up after %v, before its --timeout of 300ms", took)
	}
}

func TestWaitAllTakesEveryPod(t *testing.T) {
	fastWait(t)
	d := apitest.NewServer(t, waitPods()[:2])
	listed := d.NextRequest("/pods")
	done := startWait(t, "--all", "--for=condition=Ready", "--api-socket", d.Socket)
	awaitRequest(t, listed, done)
	ready := waitPods()[:2]
	ready[1].Status.Conditions[0].Status = corev1.ConditionTrue
	d.SetPods(ready)
	if r := <-done; r.code != 0 || r.out != "pod/web-node1 condition met\npod/kube-system/etcd-node1 condition met\n" {
		t.Errorf("wait --all: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}

	empty := apitest.NewServer(t, nil)
	if _, errOut, code := runCLI(t, "wait", "--all", "--for=condition=Ready", "--api-socket", empty.Socket); code != ExitInvalid || !strings.Contains(errOut, "no matching resources found") {
		t.Errorf("wait --all without pods: exit %d, %q; want 1, no matching resources found", code, errOut)
	}
	if out, errOut, code := runCLI(t, "wait", "--all", "--for=delete", "--api-socket", empty.Socket); code != 0 || out != "" {
		t.Errorf("wait --all --for=delete without pods: exit %d, %q %q; want 0", code, out, errOut)
	}
}

func TestWaitForDeleteEndsWhenThePodIsGone(t *testing.T) {
	fastWait(t)
	d := apitest.NewServer(t, waitPods())
	listed := d.NextRequest("/pods")
	done := startWait(t, "--for=delete", "job-node1", "gone-node1", "--api-socket", d.Socket)
	awaitRequest(t, listed, done)
	d.SetPods(waitPods()[:2])
	if r := <-done; r.code != 0 || r.out != "pod/job-node1 condition met\n" {
		t.Errorf("wait --for=delete: exit %d, stdout %q, stderr %q; want 0 and job-node1 only", r.code, r.out, r.errOut)
	}
	_, errOut, code := runCLI(t, "wait", "--for=delete", "--timeout", "300ms", "web-node1", "--api-socket", d.Socket)
	if code != ExitInvalid || errOut != "wait: timed out waiting for the condition on pods/web-node1\n" {
		t.Errorf("wait --for=delete of a pod that stays: exit %d, %q", code, errOut)
	}
}

func TestWaitForAConditionOfAnUnknownPodFailsAtOnce(t *testing.T) {
	d := apitest.NewServer(t, waitPods())
	start := time.Now()
	_, errOut, code := runCLI(t, "wait", "--for=condition=Ready", "web", "--api-socket", d.Socket)
	if code != ExitInvalid || errOut != "wait: pod \"default/web\" not found; did you mean web-node1?\n" {
		t.Errorf("wait for an unknown pod: exit %d, %q", code, errOut)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("wait for an unknown pod took %v: it must not wait for its timeout", took)
	}
}

func TestWaitWaitsForTheSourcesBeforeItLooks(t *testing.T) {
	fastWait(t)
	d := apitest.NewServer(t, nil)
	d.SetUnready("sources not ready: file")
	asked := d.NextRequest("/readyz/pods")
	done := startWait(t, "--for=condition=Ready", "web-node1", "--api-socket", d.Socket)
	awaitRequest(t, asked, done) // a pod missing now is not missing: the manifests are not read yet
	d.SetPods(waitPods())
	d.SetUnready("")
	if r := <-done; r.code != 0 || r.out != "pod/web-node1 condition met\n" {
		t.Errorf("wait before the sources are read: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	d.SetUnready("sources not ready: file")
	if _, errOut, code := runCLI(t, "wait", "--for=condition=Ready", "web-node1", "--timeout", "500ms", "--api-socket", d.Socket); code != ExitInvalid ||
		errOut != "wait: timed out waiting for the condition: sources not ready: file (HTTP 503)\n" {
		t.Errorf("wait while the sources are never read: exit %d, %q", code, errOut)
	}
	missing := filepath.Join(t.TempDir(), "gone.sock")
	if _, errOut, code := runCLI(t, "wait", "--for=condition=Ready", "web-node1", "--timeout", "500ms", "--api-socket", missing); code != ExitUsage ||
		!strings.HasPrefix(errOut, "timed out waiting for the condition: the staticpod daemon is not running: no API socket at "+missing) {
		t.Errorf("wait while no daemon answers: exit %d, %q; want 2", code, errOut)
	}
}

func TestWaitTimeoutZeroLooksOnce(t *testing.T) {
	d := apitest.NewServer(t, waitPods())
	if out, _, code := runCLI(t, "wait", "--for=condition=Ready", "--timeout=0", "web-node1", "--api-socket", d.Socket); code != 0 || out != "pod/web-node1 condition met\n" {
		t.Errorf("wait --timeout=0 on a Ready pod: exit %d, %q", code, out)
	}
	if _, errOut, code := runCLI(t, "wait", "--for=condition=Ready", "--timeout=0", "job-node1", "--api-socket", d.Socket); code != ExitInvalid || errOut != "wait: condition not met for pods/job-node1\n" {
		t.Errorf("wait --timeout=0 on a pod not Ready: exit %d, %q", code, errOut)
	}
}

func TestWaitRefusesAWrongCommandLine(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"web-node1", "wait needs --for=condition=Ready or --for=delete"},
		{"--for=condition=Ready", "wait needs a POD, or --all"},
		{"--for=condition=Ready --all web-node1", "wait takes PODs or --all, not both"},
		{"--for=jsonpath={.status.phase}=Running web-node1", `--for "jsonpath={.status.phase}=Running": use --for=condition=Ready`},
		{"--for=condition=Ready a/b/c", `"a/b/c" is not a pod`},
	} {
		_, errOut, code := runCLI(t, append([]string{"wait", "--api-socket", "/nonexistent"}, strings.Fields(tc.args)...)...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("wait %s: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestWaitForMatchesConditionsAsKubectl(t *testing.T) {
	pods := waitPods()
	web, etcd, job := &pods[0], &pods[1], &pods[2]
	for _, tc := range []struct {
		flag string
		pod  *corev1.Pod
		want bool
	}{
		{"condition=Ready", web, true},
		{"condition=ready", web, true},
		{"condition=Ready=true", web, true},
		{"condition=Ready", etcd, false},
		{"condition=Ready=false", etcd, true},
		{"condition=Ready=False", web, false},
		{"condition=Ready=false", job, false}, // no Ready condition at all
		{"condition=Ready", nil, false},
		{"delete", nil, true},
		{"Delete", web, false},
	} {
		w, err := parseFor(tc.flag)
		if err != nil {
			t.Fatalf("parseFor(%q): %v", tc.flag, err)
		}
		if got := w.met(tc.pod); got != tc.want {
			name := "nil"
			if tc.pod != nil {
				name = tc.pod.Name
			}
			t.Errorf("--for=%s met by %s = %v, want %v", tc.flag, name, got, tc.want)
		}
	}
}
