// Package handlers knows the runtime handlers pods may run under (a pod's
// runtimeClassName, or its RuntimeClass's handler) and what containerd runs a
// container of each with: a runtime type and, for containerd's runc shim, its options
// (BinaryName: runc, crun or another OCI runtime). Handlers come from containerd's own
// CRI configuration, as the kubelet's runtime finds them there, and from
// --runtime-handler NAME=VALUE, which wins. It imports containerd's runc options and
// client types and nothing of staticpod's.
package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/plugins"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RuncType is the runtime type of containerd's runc shim, whose BinaryName option
// picks the OCI runtime it runs.
const RuncType = plugins.RuntimeRuncV2

// Default is the handler every runtime has: containerd's runc shim running runc.
const Default = "runc"

// Where a handler was configured.
const (
	FromFlag       = "--runtime-handler"
	FromContainerd = "containerd"
	FromBuiltIn    = "built in"
)

// Handler is one runtime handler.
type Handler struct {
	Name string
	// Type is containerd's runtime type: RuncType, or another shim's
	// ("io.containerd.kata.v2").
	Type string
	// Options are the runc shim's options (BinaryName, Root, ...), for RuncType only;
	// nil for runc's defaults.
	Options *options.Options
	Source  string // FromFlag, FromContainerd or FromBuiltIn
	// OCIVersion, unless "", is the ociVersion a container's spec declares under h: the
	// newest its OCI runtime binary takes (see Probe), where it is older than the one
	// containerd's client writes. crun refuses a version it does not know.
	OCIVersion string
}

// SpecOpts are the spec options of a container under h.
func (h Handler) SpecOpts() []oci.SpecOpts {
	if h.OCIVersion == "" {
		return nil
	}
	return []oci.SpecOpts{func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Version = h.OCIVersion
		return nil
	}}
}

// Opts are the container options that run a container under h; systemdCgroup is the
// runc shim's SystemdCgroup option, which the cgroup driver decides. A handler of
// another type gets no options: its shim reads its own configuration.
func (h Handler) Opts(systemdCgroup bool) []client.NewContainerOpts {
	if h.Type != RuncType {
		return []client.NewContainerOpts{client.WithRuntime(h.Type, nil)}
	}
	opts := &options.Options{}
	if h.Options != nil {
		opts = cloneOptions(h.Options)
	}
	opts.SystemdCgroup = systemdCgroup
	return []client.NewContainerOpts{client.WithRuntime(RuncType, opts)}
}

func cloneOptions(o *options.Options) *options.Options {
	return &options.Options{
		NoPivotRoot: o.NoPivotRoot, NoNewKeyring: o.NoNewKeyring, ShimCgroup: o.ShimCgroup,
		IoUid: o.IoUid, IoGid: o.IoGid, BinaryName: o.BinaryName, Root: o.Root,
		SystemdCgroup: o.SystemdCgroup, CriuImagePath: o.CriuImagePath, CriuWorkPath: o.CriuWorkPath,
	}
}

// Set is the handlers of a runtime, by name.
type Set map[string]Handler

// New is the handlers of containerd's CRI configuration (fromContainerd, may be nil)
// and of --runtime-handler (flags: NAME=VALUE each), the flags' winning, with the
// built-in runc where neither names one.
func New(fromContainerd Set, flags []string) (Set, error) {
	s := Set{Default: {Name: Default, Type: RuncType, Source: FromBuiltIn}}
	maps.Copy(s, fromContainerd)
	for _, f := range flags {
		h, err := Parse(f)
		if err != nil {
			return nil, err
		}
		s[h.Name] = h
	}
	return s, nil
}

// Lookup returns the handler called name.
func (s Set) Lookup(name string) (Handler, bool) {
	h, ok := s[name]
	return h, ok
}

// Names are the handlers' names, sorted.
func (s Set) Names() []string { return slices.Sorted(maps.Keys(s)) }

// runtimeType is how a containerd runtime type is spelled: io.containerd.<name>.v<n>.
var runtimeType = regexp.MustCompile(`^io\.containerd\.[a-z0-9_-]+(\.[a-z0-9_-]+)*\.v[0-9]+$`)

// Parse reads one --runtime-handler: NAME=VALUE, where VALUE is the absolute path of an
// OCI runtime binary that containerd's runc shim runs (crun=/usr/bin/crun), or a
// containerd runtime type (kata=io.containerd.kata.v2).
func Parse(flag string) (Handler, error) {
	name, value, ok := strings.Cut(flag, "=")
	if !ok || name == "" || value == "" {
		return Handler{}, fmt.Errorf("--runtime-handler %q: want NAME=VALUE, VALUE an OCI runtime binary (crun=/usr/bin/crun) or a containerd runtime type (kata=io.containerd.kata.v2)", flag)
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return Handler{}, fmt.Errorf("--runtime-handler %q: the name %q is not a RuntimeClass handler: %s", flag, name, strings.Join(msgs, "; "))
	}
	h := Handler{Name: name, Source: FromFlag}
	switch {
	case filepath.IsAbs(value):
		st, err := os.Stat(value)
		if err != nil {
			return Handler{}, fmt.Errorf("--runtime-handler %q: %w", flag, err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return Handler{}, fmt.Errorf("--runtime-handler %q: %s is not an executable file", flag, value)
		}
		h.Type, h.Options = RuncType, &options.Options{BinaryName: value}
	case runtimeType.MatchString(value):
		h.Type = value
	default:
		return Handler{}, fmt.Errorf("--runtime-handler %q: %q is neither an absolute path to an OCI runtime binary nor a containerd runtime type (io.containerd.<name>.v<n>)", flag, value)
	}
	return h, nil
}

// criConfig is what matters here of the CRI configuration containerd reports in its
// CRI Status (1.6 and 2.x alike: the runtimes of containerd.runtimes, under
// plugins."io.containerd.grpc.v1.cri" in 1.6's config.toml and
// plugins."io.containerd.cri.v1.runtime" in 2.x's).
type criConfig struct {
	Containerd struct {
		Runtimes map[string]struct {
			Type    string         `json:"runtimeType"`
			Options map[string]any `json:"options"`
		} `json:"runtimes"`
	} `json:"containerd"`
}

// FromCRI reads the runtimes of containerd's CRI configuration, the JSON its CRI Status
// reports ("" for none). The runc shim's runtimes keep the options a handler needs
// (BinaryName, Root and the like); others keep their type alone.
func FromCRI(config string) (Set, error) {
	if config == "" {
		return nil, nil
	}
	var cfg criConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return nil, fmt.Errorf("read containerd's CRI runtimes: %w", err)
	}
	s := Set{}
	for name, rt := range cfg.Containerd.Runtimes {
		if len(validation.IsDNS1123Label(name)) > 0 || rt.Type == "" {
			continue // no pod could name it
		}
		h := Handler{Name: name, Type: rt.Type, Source: FromContainerd}
		if rt.Type == RuncType {
			h.Options = runcOptions(rt.Options)
		}
		s[name] = h
	}
	return s, nil
}

// runcOptions reads the runc shim's options as containerd's config.toml spells them.
func runcOptions(m map[string]any) *options.Options {
	str := func(k string) string { v, _ := m[k].(string); return v }
	flag := func(k string) bool { v, _ := m[k].(bool); return v }
	num := func(k string) uint32 { v, _ := m[k].(float64); return uint32(v) }
	return &options.Options{
		BinaryName: str("BinaryName"), Root: str("Root"), ShimCgroup: str("ShimCgroup"),
		NoPivotRoot: flag("NoPivotRoot"), NoNewKeyring: flag("NoNewKeyring"),
		IoUid: num("IoUid"), IoGid: num("IoGid"),
		CriuImagePath: str("CriuImagePath"), CriuWorkPath: str("CriuWorkPath"),
	}
}
