package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// healthz answers 200 "ok" while the container runtime answers and the PLEG relists,
// else 503 with every reason, one per line.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if reasons := s.unhealthy(r.Context()); len(reasons) > 0 {
		s.log.Debug("healthz: unhealthy", "reasons", reasons)
		writeText(w, http.StatusServiceUnavailable, strings.Join(reasons, "\n"))
		return
	}
	writeText(w, http.StatusOK, "ok")
}

// unhealthy says why staticpod is not healthy, nothing when it is: the container
// runtime does not answer, or the PLEG has not relisted lately.
func (s *Server) unhealthy(ctx context.Context) []string {
	var reasons []string
	if s.cfg.RuntimeHealthy != nil {
		ctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
		err := s.cfg.RuntimeHealthy(ctx)
		cancel()
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("container runtime unreachable: %v", err))
		}
	}
	if ok, last := s.cfg.Backend.Healthy(); !ok {
		if last.IsZero() {
			reasons = append(reasons, "PLEG has not relisted yet")
		} else {
			reasons = append(reasons, fmt.Sprintf("PLEG last relisted %s ago (at %s): not in the last 3m0s",
				time.Since(last).Round(time.Second), last.UTC().Format(time.RFC3339)))
		}
	}
	return reasons
}

// readyz answers 200 "ok" once every configured source has delivered a snapshot, else
// 503 naming those that have not.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if waiting := s.waitingSources(); len(waiting) > 0 {
		writeText(w, http.StatusServiceUnavailable, "sources not ready: "+strings.Join(waiting, ", "))
		return
	}
	writeText(w, http.StatusOK, "ok")
}

// readyzPods answers 200 "ok" once /pods lists every pod the sources want with a status
// of its own: every source has delivered a snapshot, and every wanted pod has been synced
// once by its worker, image pulls included (a pod whose first pull is under way is
// listed already, Pending, with the pull's progress; it is not synced). Else 503 says
// which is missing. staticpod wait asks it before it takes the pods.
func (s *Server) readyzPods(w http.ResponseWriter, _ *http.Request) {
	switch waiting := s.waitingSources(); {
	case len(waiting) > 0:
		writeText(w, http.StatusServiceUnavailable, "sources not ready: "+strings.Join(waiting, ", "))
	case !s.cfg.Backend.Settled():
		writeText(w, http.StatusServiceUnavailable, "pods not synced yet: a wanted pod has not been synced once (its images are pulled or its containers started)")
	default:
		writeText(w, http.StatusOK, "ok")
	}
}

// waitingSources are the configured sources that have not delivered a snapshot.
func (s *Server) waitingSources() []string {
	var waiting []string
	for _, src := range s.cfg.Sources {
		if !s.cfg.Backend.SourceReady(src) {
			waiting = append(waiting, src)
		}
	}
	return waiting
}

// listPods answers the kubelet's read-only /pods: a v1.PodList of every wanted pod with
// its status.
func (s *Server) listPods(w http.ResponseWriter, _ *http.Request) {
	pods := s.cfg.Backend.Pods()
	list := corev1.PodList{
		TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
		Items:    make([]corev1.Pod, 0, len(pods)),
	}
	for _, p := range pods {
		list.Items = append(list.Items, *withKind(p))
	}
	writeJSON(w, http.StatusOK, &list)
}

// getPod answers one pod by namespace and (full, static) name.
func (s *Server) getPod(w http.ResponseWriter, r *http.Request) {
	pod := s.findPod(r.PathValue("namespace"), r.PathValue("name"))
	if pod == nil {
		writeNotFound(w, "pods", r.PathValue("name"))
		return
	}
	writeJSON(w, http.StatusOK, withKind(pod))
}

func (s *Server) findPod(namespace, name string) *corev1.Pod {
	for _, p := range s.cfg.Backend.Pods() {
		if p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	return nil
}

// withKind returns a shallow copy of the runner's pod (which others share and must not
// change) that names its kind.
func withKind(p *corev1.Pod) *corev1.Pod {
	c := *p
	c.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	return &c
}
