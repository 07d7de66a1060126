package containerdrt

import (
	"context"
	"fmt"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

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
	// maxHostnameBytes is the longest hostname the kubelet gives a pod.
	maxHostnameBytes = 63
)

// processOpts sets the container's process: its arguments, environment, working
// directory and terminal, with the kubelet's semantics (command replaces the image's
// ENTRYPOINT, args its CMD; $(VAR) references expanded; downward API values resolved).
func processOpts(in specInput) ([]oci.SpecOpts, error) {
	c := in.Container
	env, err := containerEnv(in)
	if err != nil {
		return nil, err
	}
	args, err := processArgs(c, in.Image.Entrypoint, in.Image.Cmd, env.lookup)
	if err != nil {
		return nil, err
	}
	hostname, err := podHostnameFile(in.Pod) // HOSTNAME is what /etc/hostname holds, as on the CRI
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	// The CRI's order: the default PATH, HOSTNAME, then the image's variables, then the
	// container's, each replacing an earlier one of the same name in place.
	var all envList
	all.set(defaultPathEnv)
	all.set(hostnameEnv + "=" + hostname)
	for _, kv := range in.Image.Env {
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

// expandEnvRefs expands $(VAR) references in s the way the kubelet does
// (third_party/forked/golang/expansion): "$$" is a literal "$", a reference to an
// undefined variable is kept verbatim, an unclosed "$(" is kept, and "$" before any
// other byte is kept with that byte. Expanded values are never expanded again.
func expandEnvRefs(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
	}
	return b.String()
}

// containerEnv resolves the container's env in declaration order. As in the
// kubelet's makeEnvironmentVariables, a value may reference only variables declared
// before it (the image's variables are not visible: the kubelet never sees them), and a
// name declared twice keeps its last value.
func containerEnv(in specInput) (*envList, error) {
	env := &envList{}
	if err := objectEnv(in, env); err != nil {
		return nil, err
	}
	for _, e := range in.Container.Env {
		var v string
		switch {
		case e.Value != "":
			v = expandEnvRefs(e.Value, env.lookup)
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			var err error
			if v, err = fieldRefValue(in, e.ValueFrom.FieldRef); err != nil {
				return nil, fmt.Errorf("%w: container %q: env %s: %w", runner.ErrCreateConfig, in.Container.Name, e.Name, err)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			var err error
			if v, err = resourceFieldRefValue(in, e.ValueFrom.ResourceFieldRef); err != nil {
				return nil, fmt.Errorf("%w: container %q: env %s: %w", runner.ErrCreateConfig, in.Container.Name, e.Name, err)
			}
		case e.ValueFrom.ConfigMapKeyRef != nil || e.ValueFrom.SecretKeyRef != nil:
			var set bool
			var err error
			if v, set, err = keyRefValue(in, e.ValueFrom); err != nil {
				return nil, fmt.Errorf("%w: container %q: env %s: %w", runner.ErrCreateConfig, in.Container.Name, e.Name, err)
			}
			if !set {
				continue
			}
		default:
			return nil, fmt.Errorf("%w: container %q: env %s: unsupported source", runner.ErrCreateConfig, in.Container.Name, e.Name)
		}
		env.set(e.Name + "=" + v)
	}
	return env, nil
}

// fieldRefValue is the downward API value of a pod field, as the kubelet's
// podFieldSelectorRuntimeValue and fieldpath.ExtractFieldPathAsString compute it. A
// node has one IP per pod and host here, so the plural fields hold one address.
func fieldRefValue(in specInput, ref *corev1.ObjectFieldSelector) (string, error) {
	pod := in.Pod
	switch ref.FieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return in.HostIP, nil
	case "status.podIP", "status.podIPs":
		return in.PodIP, nil
	}
	path, key, ok := splitSubscript(ref.FieldPath)
	if !ok {
		return "", fmt.Errorf("fieldRef %q is not supported", ref.FieldPath)
	}
	switch path {
	case "metadata.labels":
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return "", fmt.Errorf("fieldRef %q: invalid key: %s", ref.FieldPath, strings.Join(errs, "; "))
		}
		return pod.Labels[key], nil
	case "metadata.annotations":
		if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
			return "", fmt.Errorf("fieldRef %q: invalid key: %s", ref.FieldPath, strings.Join(errs, "; "))
		}
		return pod.Annotations[key], nil
	}
	return "", fmt.Errorf("fieldRef %q does not support a subscript", ref.FieldPath)
}

// splitSubscript splits "metadata.labels['key']" into its path and key, as
// fieldpath.SplitMaybeSubscriptedPath does.
func splitSubscript(fieldPath string) (path, key string, ok bool) {
	s, found := strings.CutSuffix(fieldPath, "']")
	if !found {
		return "", "", false
	}
	path, key, found = strings.Cut(s, "['")
	if !found || path == "" {
		return "", "", false
	}
	return path, key, true
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

// stopSignal is the signal that stops the container: the pod's lifecycle.stopSignal
// (the kubelet's ContainerStopSignals), else the image's StopSignal, else SIGTERM. It
// is a name such as "SIGTERM" or "SIGRTMIN+3", for the caller to parse.
func stopSignal(in specInput) string {
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

// envList is an environment in first-set order where setting a name again replaces
// its value in place.
type envList struct {
	names  []string
	values []string
	index  map[string]int
}

// set adds or replaces "name=value"; an entry without "=" sets an empty value.
func (l *envList) set(kv string) {
	name, value, _ := strings.Cut(kv, "=")
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[name]; ok {
		l.values[i] = value
		return
	}
	l.index[name] = len(l.names)
	l.names = append(l.names, name)
	l.values = append(l.values, value)
}

func (l *envList) lookup(name string) (string, bool) {
	i, ok := l.index[name]
	if !ok {
		return "", false
	}
	return l.values[i], true
}

func (l *envList) strings() []string {
	out := make([]string, len(l.names))
	for i, name := range l.names {
		out[i] = name + "=" + l.values[i]
	}
	return out
}
