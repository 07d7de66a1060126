package revisions

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/manifests"
)

// Observe learns from a pod's published status (the pod as its worker runs it, with
// its status): a revision that is Ready is kept as its name's revision to go back to,
// replacing the one kept before; a revision that is not Ready within its progress
// deadline of its containers starting (a crash loop is not), or that failed, is rolled
// back to the kept one. It returns the rollback it decided, already recorded on disk,
// for the caller to act on; nil when there is none. It logs what it decides. A name with no earlier Ready
// revision is never rolled back, and one that is rolled back is decided on no more
// until its source asks for another revision (Substitute).
func (s *Store) Observe(pod *corev1.Pod) *Rollback {
	rb, err := s.observe(pod)
	if err != nil {
		// Nothing was rolled back; the next status tries again.
		s.opts.Log.Warn("keep pod revision", "pod", manifests.Key(pod), "uid", pod.UID, "err", err)
	}
	if rb != nil {
		s.opts.Log.Warn("pod rolled back", "pod", rb.Pod, "uid", rb.From, "to", rb.To, "reason", rb.Reason)
	}
	return rb
}

func (s *Store) observe(pod *corev1.Pod) (*Rollback, error) {
	if s == nil {
		return nil, nil
	}
	key := manifests.Key(pod)
	rec := s.names[key]
	if rec != nil && rec.RolledBack != nil {
		return nil, nil // not retried
	}
	if manifests.ConditionTrue(pod.Status, corev1.PodReady) {
		delete(s.started, pod.UID)
		if rec != nil && rec.Ready.UID == pod.UID {
			return nil, nil
		}
		return nil, s.save(key, &record{Ready: asGiven(pod)})
	}
	d := s.Deadline(pod)
	if d <= 0 || rec == nil || rec.Ready.UID == pod.UID || pod.Status.Phase == corev1.PodSucceeded {
		return nil, nil // no deadline; nothing to go back to; the kept revision itself; done
	}
	var reason string
	switch start := s.start(pod); {
	case pod.Status.Phase == corev1.PodFailed:
		reason = "failed"
	case !start.IsZero() && !s.opts.Now().Before(start.Add(d)):
		reason = fmt.Sprintf("was not Ready within %s of its containers starting", d)
	default:
		return nil, nil
	}
	rb := &Rollback{Pod: key, From: pod.UID, To: rec.Ready.UID, Reason: reason, At: s.opts.Now()}
	if err := s.save(key, &record{Ready: rec.Ready, RolledBack: rb}); err != nil {
		return nil, fmt.Errorf("roll back %s: %w", key, err)
	}
	delete(s.started, pod.UID)
	delete(s.running, key)
	s.rollbacks.Inc()
	out := *rb
	return &out, nil
}

// start is when the revision's containers first started, as far as its statuses and
// what the Store saw of them tell: a crash loop keeps its first start.
func (s *Store) start(pod *corev1.Pod) time.Time {
	first := s.started[pod.UID]
	note := func(t *metav1.Time) {
		if t != nil && !t.IsZero() && (first.IsZero() || t.Time.Before(first)) {
			first = t.Time
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			for _, st := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
				if st.Running != nil {
					note(&st.Running.StartedAt)
				}
				if st.Terminated != nil {
					note(&st.Terminated.StartedAt)
				}
			}
		}
	}
	if !first.IsZero() {
		s.started[pod.UID] = first
	}
	return first
}

// asGiven is pod as its source gave it: without its status and what the runner adds
// to the pods it serves.
func asGiven(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	out.Status = corev1.PodStatus{}
	delete(out.Annotations, manifests.AnnotationSeen)
	delete(out.Annotations, manifests.AnnotationRolledBackFrom)
	delete(out.Annotations, manifests.AnnotationRollbackReason)
	return out
}
