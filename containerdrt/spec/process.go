package spec

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/runner"
)

const (
	// defaultPathEnv is the PATH a container gets when neither its image nor its pod
	// sets one: containerd's and Docker's default.
	defaultPathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// hostnameEnv is the variable the CRI sets to the pod's hostname.
	hostnameEnv = "HOSTNAME"
	// defaultWorkingDir is the cwd when neither the container nor its image sets one.
	defaultWorkingDir = "/"
	// defaultStopSignal is what stops a container whose image and pod name no signal.
	defaultStopSignal = "SIGTERM"
)

// Process sets the container's process: its arguments, environment, working
// directory and terminal, with the kubelet's semantics (command replaces the image's
// ENTRYPOINT, args its CMD; $(VAR) references expanded; downward API values resolved).
func Process(in Input) ([]oci.SpecOpts, error) {
	c := in.Container
	env, err := containerEnv(in)
	if err != nil {
		return nil, err
	}
	args, err := processArgs(c, in.Image.Entrypoint, in.Image.Cmd, env.lookup)
	if err != nil {
		return nil, err
	}
	// The CRI's order: the default PATH, HOSTNAME, then the image's variables, then
	// the device plugins' and the container's (the kubelet's order), each replacing an earlier one of the same name in place.
	var all envList
	all.set(defaultPathEnv)
	all.set(hostnameEnv + "=" + in.Prepared.Hostname) // what /etc/hostname holds, as on the CRI
	for _, kv := range in.Image.Env {
		all.set(kv)
	}
	for _, kv := range in.Devices.EnvList() { // the kubelet's order: device plugins', then the container's
		all.set(kv)
	}
	for i, name := range env.names {
		all.set(name + "=" + env.values[i])
	}
	opts := []oci.SpecOpts{
		oci.WithProcessArgs(args...),
		withProcessEnv(all.strings()),
		oci.WithProcessCwd(workingDir(c.WorkingDir, in.Image.WorkingDir)),
		withTerminal(c.TTY),
		withoutRlimits,
	}
	return opts, nil
}

// processArgs applies the kubelet's rules: command replaces the image's ENTRYPOINT and
// args its CMD, but a command alone drops the image's CMD too; $(VAR) references in
// command and args are expanded from the container's environment. An ENTRYPOINT of
// [""] counts as none, as in Docker and the CRI.
func processArgs(c *corev1.Container, entrypoint, cmd []string, lookup func(string) (string, bool)) ([]string, error) {
	command := expand(c.Command, lookup)
	args := expand(c.Args, lookup)
	if len(command) == 0 {
		if len(args) == 0 {
			args = cmd
		}
		if len(entrypoint) != 1 || entrypoint[0] != "" {
			command = entrypoint
		}
	}
	all := append(append([]string{}, command...), args...)
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: container %q: no command: the pod sets neither command nor args and the image has no ENTRYPOINT or CMD", runner.ErrCreateConfig, c.Name)
	}
	return all, nil
}

func expand(in []string, lookup func(string) (string, bool)) []string {
	var out []string
	for _, s := range in {
		out = append(out, expandEnvRefs(s, lookup))
	}
	return out
}

func workingDir(container, image string) string {
	switch {
	case container != "":
		return container
	case image != "":
		return image
	}
	return defaultWorkingDir
}

// StopSignal is the signal that stops the container: the pod's lifecycle.stopSignal
// (the kubelet's ContainerStopSignals), else the image's StopSignal, else SIGTERM. It
// is a name such as "SIGTERM" or "SIGRTMIN+3", for the caller to parse.
func StopSignal(in Input) string {
	if lc := in.Container.Lifecycle; lc != nil && lc.StopSignal != nil {
		return string(*lc.StopSignal)
	}
	if in.Image.StopSignal != "" {
		return in.Image.StopSignal
	}
	return defaultStopSignal
}

// withProcessEnv replaces the process environment (oci.WithEnv merges into whatever an
// earlier option such as oci.WithImageConfig left there).
func withProcessEnv(env []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.Env = env
		return nil
	}
}

// withTerminal sets or clears the process terminal. stdin and stdinOnce only decide
// whether the runtime keeps the container's stdin open; tty alone asks for a terminal,
// as in the CRI.
func withTerminal(tty bool) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *oci.Spec) error {
		if tty {
			return oci.WithTTY(ctx, cl, c, s)
		}
		s.Process.Terminal = false
		return nil
	}
}

// withoutRlimits removes containerd's default RLIMIT_NOFILE of 1024, as the CRI does
// (containerd/cri#515): a pod's processes inherit the shim's limits, as on a kubelet
// node. Nothing is raised: staticpod may lack CAP_SYS_RESOURCE.
func withoutRlimits(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	s.Process.Rlimits = nil
	return nil
}
