package client

import (
	"context"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Summary returns what the node, its pods and their containers use, as the daemon last
// sampled it from their cgroups (GET /stats/summary, the kubelet's shape).
func (c *Client) Summary(ctx context.Context) (*statsapi.Summary, error) {
	var sum statsapi.Summary
	if err := c.getJSON(ctx, "/stats/summary", nil, &sum); err != nil {
		return nil, err
	}
	return &sum, nil
}
