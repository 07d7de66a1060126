package api

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeServesTheNodeWithItsReadyCondition(t *testing.T) {
	b := newFakeBackend()
	cfg := testConfig(b, nil)
	cfg.Node = &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "cam-7", Labels: map[string]string{"device": "camera"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "camera", Effect: corev1.TaintEffectNoExecute}}}}
	h := mustNew(t, cfg).Handler()
	get := func() corev1.Node {
		t.Helper()
		rec := serve(t, h, http.MethodGet, "/node", nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /node = %d %s", rec.Code, rec.Body)
		}
		var n corev1.Node
		decodeJSON(t, rec.Body.Bytes(), &n)
		return n
	}
	n := get()
	if n.Kind != "Node" || n.Name != "cam-7" || n.Labels["device"] != "camera" || len(n.Spec.Taints) != 1 {
		t.Errorf("GET /node = %+v", n)
	}
	if c := n.Status.Conditions; len(c) != 1 || c[0].Type != corev1.NodeReady || c[0].Status != corev1.ConditionTrue || c[0].Reason != "KubeletReady" {
		t.Errorf("conditions of a healthy node = %+v, want Ready True", c)
	}
	b.setHealthy(false, time.Time{})
	if c := get().Status.Conditions; len(c) != 1 || c[0].Status != corev1.ConditionFalse || c[0].Reason != "KubeletNotReady" || c[0].Message != "PLEG has not relisted yet" {
		t.Errorf("conditions of an unhealthy node = %+v, want Ready False with why", c)
	}
	if cfg.Node.Status.Conditions != nil {
		t.Error("GET /node changed the configured node")
	}
}

func TestNodeAnswers404WithoutANode(t *testing.T) {
	if rec := serve(t, mustNew(t, testConfig(newFakeBackend(), nil)).Handler(), http.MethodGet, "/node", nil); rec.Code != http.StatusNotFound {
		t.Errorf("GET /node without a node = %d, want 404", rec.Code)
	}
}
