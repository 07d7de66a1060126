// Package action runs the handler of a probe or a lifecycle hook as the kubelet runs
// it: exec in the container, HTTP GET, TCP connect and gRPC health checks against the
// pod (from inside its network namespace, see Runtime.Dial), and sleep. It owns the
// handlers' rules (named ports, the probe's user agent, redirects only to the same
// host, output kept for messages); when to run them, and what a result means, are the
// runner's.
//
// It reaches the runtime only through its narrow Runtime, which the runner adapts its
// own to: it must not import the runner, containerd or anything of staticpod's.
package action
