package api

import (
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubelet's reasons for its node's Ready condition.
const (
	reasonKubeletReady    = "KubeletReady"
	reasonKubeletNotReady = "KubeletNotReady"
)

// node serves GET /node: the node the pods are admitted on (Config.Node: its labels,
// taints, capacity and allocatable), a v1.Node with the kubelet's Ready condition:
// True while /healthz is ok, else False with why. The kubelet's pressure conditions
// are not reported: staticpod evicts nothing for pressure.
func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Node == nil {
		writeNotFoundMsg(w, "node", "", "this server describes no node")
		return
	}
	n := s.cfg.Node.DeepCopy()
	now := metav1.Now()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now,
		Reason: reasonKubeletReady, Message: "staticpod is posting ready status"}
	if reasons := s.unhealthy(r.Context()); len(reasons) > 0 {
		ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, reasonKubeletNotReady, strings.Join(reasons, "; ")
	}
	n.Status.Conditions = []corev1.NodeCondition{ready}
	writeJSON(w, http.StatusOK, n)
}
