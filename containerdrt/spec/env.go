package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

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
func containerEnv(in Input) (*envList, error) {
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
			if v, err = FieldRefValue(in, e.ValueFrom.FieldRef); err != nil {
				return nil, fmt.Errorf("%w: container %q: env %s: %w", runner.ErrCreateConfig, in.Container.Name, e.Name, err)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			var err error
			if v, err = ResourceFieldRefValue(in, e.ValueFrom.ResourceFieldRef); err != nil {
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

// objectEnv adds the variables of the container's envFrom, in order (a later source
// overrides an earlier one, and env overrides them all). Keys that are not valid
// variable names are skipped, as the kubelet skips them.
func objectEnv(in Input, env *envList) error {
	for _, from := range in.Container.EnvFrom {
		var ref manifests.ObjectRef
		var optional *bool
		switch {
		case from.ConfigMapRef != nil:
			ref = manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: in.Pod.Namespace, Name: from.ConfigMapRef.Name}
			optional = from.ConfigMapRef.Optional
		case from.SecretRef != nil:
			ref = manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: in.Pod.Namespace, Name: from.SecretRef.Name}
			optional = from.SecretRef.Optional
		default:
			continue
		}
		data, ok := in.Objects.Data(ref)
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%w: container %q: envFrom: %w", runner.ErrCreateConfig, in.Container.Name, NotFound(ref))
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			name := from.Prefix + k
			if len(validation.IsRelaxedEnvVarName(name)) == 0 {
				env.set(name + "=" + string(data[k]))
			}
		}
	}
	return nil
}

// keyRefValue is the value of an env[].valueFrom configMapKeyRef or secretKeyRef, and
// whether the variable is set at all (an optional reference to what is missing leaves
// it unset).
func keyRefValue(in Input, src *corev1.EnvVarSource) (string, bool, error) {
	var ref manifests.ObjectRef
	var key string
	var optional *bool
	switch {
	case src.ConfigMapKeyRef != nil:
		r := src.ConfigMapKeyRef
		ref, key, optional = manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: in.Pod.Namespace, Name: r.Name}, r.Key, r.Optional
	case src.SecretKeyRef != nil:
		r := src.SecretKeyRef
		ref, key, optional = manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: in.Pod.Namespace, Name: r.Name}, r.Key, r.Optional
	}
	opt := optional != nil && *optional
	data, ok := in.Objects.Data(ref)
	if !ok {
		if opt {
			return "", false, nil
		}
		return "", false, NotFound(ref)
	}
	v, ok := data[key]
	if !ok {
		if opt {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in %s", key, ref)
	}
	return string(v), true, nil
}

// NotFound is the error of a reference to a ConfigMap or Secret that the pod's source
// does not hold.
func NotFound(ref manifests.ObjectRef) error {
	return fmt.Errorf("%s %q not found (no such document beside the pod in namespace %s)", strings.ToLower(ref.Kind), ref.Name, ref.Namespace)
}

// SubPath is the subPath of a volumeMount: its subPathExpr, when it has one, expanded
// from the container's environment.
func SubPath(in Input, vm corev1.VolumeMount) (string, error) {
	sub := vm.SubPath
	if vm.SubPathExpr != "" {
		env, err := containerEnv(in)
		if err != nil {
			return "", err
		}
		if sub, err = expandSubPathExpr(vm.SubPathExpr, env.lookup); err != nil {
			return "", err
		}
	}
	return sub, nil
}

// expandSubPathExpr expands $(VAR) references in a subPathExpr from the container's
// environment, as the kubelet's ExpandContainerVolumeMounts does: a reference to a
// variable that is unset or empty is an error rather than kept verbatim.
func expandSubPathExpr(expr string, lookup func(string) (string, bool)) (string, error) {
	var missing []string
	out := expandEnvRefs(expr, func(name string) (string, bool) {
		v, _ := lookup(name)
		if v == "" && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return v, true
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("subPathExpr %q: missing value for %s", expr, strings.Join(missing, ", "))
	}
	return out, nil
}
