package cli

import (
	"context"
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/client"
)

// maxSuggestions bounds the near names a not-found error lists.
const maxSuggestions = 3

// fetchPod returns the pod ref names. A pod the daemon does not run is a
// *notFoundError that suggests the names that come close.
func fetchPod(ctx context.Context, api *client.Client, ref podRef) (*corev1.Pod, error) {
	pod, err := api.Pod(ctx, ref.Namespace, ref.Name)
	var nf *client.NotFoundError
	if errors.As(err, &nf) {
		e := &notFoundError{NotFoundError: nf}
		if list, err := api.Pods(ctx); err == nil {
			e.total, e.near = len(list.Items), nearNames(ref, list.Items)
		}
		return nil, e
	}
	return pod, err
}

// notFoundError is a pod the daemon does not run, with the names that come close.
type notFoundError struct {
	*client.NotFoundError
	near  []string
	total int // pods the daemon runs
}

func (e *notFoundError) Error() string {
	msg := e.NotFoundError.Error()
	switch {
	case len(e.near) == 1:
		return msg + "; did you mean " + e.near[0] + "?"
	case len(e.near) > 1:
		return msg + "; did you mean one of " + strings.Join(e.near, ", ") + "?"
	case e.total == 0:
		return msg + ": staticpod runs no pods"
	}
	return msg + " (see staticpod ps)"
}

func (e *notFoundError) Unwrap() error { return e.NotFoundError }

// nearNames returns the pods whose name comes close to ref's, closest first: the same
// name in another namespace, names that start with it (a static name without its node
// suffix: web for web-node1), and names within a few typos.
func nearNames(ref podRef, pods []corev1.Pod) []string {
	type candidate struct {
		name string
		dist int
	}
	var found []candidate
	for _, p := range pods {
		d := levenshtein(ref.Name, p.Name)
		switch {
		case strings.HasPrefix(p.Name, ref.Name+"-") || strings.HasPrefix(ref.Name, p.Name+"-"):
			d = min(d, 1)
		case d > max(2, len(ref.Name)/4):
			continue
		}
		if p.Namespace != ref.Namespace {
			d++
		}
		found = append(found, candidate{DisplayName(p.Namespace, p.Name), d})
	}
	slices.SortStableFunc(found, func(a, b candidate) int { return a.dist - b.dist })
	var out []string
	for _, c := range found[:min(len(found), maxSuggestions)] {
		out = append(out, c.name)
	}
	return out
}

// levenshtein is the edit distance between a and b, in bytes.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
