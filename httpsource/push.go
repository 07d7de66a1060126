package httpsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/staticpod/staticpod/manifests"
)

// Errors of the push store, for the API to map onto status codes.
var (
	ErrNotFound    = errors.New("manifest not found")
	ErrInvalidName = errors.New("invalid manifest name")
	// ErrStarting is a push refused because staticpod cannot tell yet whether another
	// pod has its UID: it has not read every source, or not listed the runtime, since
	// it started. Pushing again later works.
	ErrStarting = errors.New("staticpod is starting")
)

// manifestExt is the extension of stored manifests: <dir>/<name>.yaml.
const manifestExt = ".yaml"

// startWait is how long a push made while staticpod starts waits for it to know who
// has each UID (Push.HolderKnown) before it is answered ErrStarting: long enough for a
// start without a large image import, well within the API's write timeout.
const startWait = 20 * time.Second

// nameRE is a DNS-1123 label: it holds no "/", "." or "..", so <dir>/<name>.yaml never
// leaves dir.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Manifest describes one stored manifest.
type Manifest struct {
	Name    string    `json:"name"`
	Pods    []string  `json:"pods"`              // namespace/name of each pod, as it runs
	Objects []string  `json:"objects,omitempty"` // "ConfigMap namespace/name", "Secret namespace/name"
	Stored  time.Time `json:"stored"`            // when this content was stored
}

// entry is one stored manifest as loaded.
type entry struct {
	data       []byte
	pods       []*corev1.Pod
	configMaps []*corev1.ConfigMap
	secrets    []*corev1.Secret
	classes    []*nodev1.RuntimeClass
	stored     time.Time
}

// Push is the push source behind the API's /manifests: named manifests, validated
// before they are stored, persisted one file each under dir so that they survive
// restarts, and sent as one snapshot of all their pods. It is safe for concurrent use.
type Push struct {
	dir  string
	node string
	log  *slog.Logger

	// Holder, when set, returns the pod that has a UID, wanted by a source or running,
	// or nil (the runner's UIDHolder): Put refuses a pod that would take it. An error
	// means the holder cannot be known yet: Put then refuses with ErrStarting.
	// HolderKnown, when set, is closed once Holder can tell: Put waits for it, up to
	// startWait, before it asks. Set both before the first Put.
	Holder      func(types.UID) (*corev1.Pod, error)
	HolderKnown <-chan struct{}
	startWait   time.Duration

	// changed wakes Run after a Put or Delete; one slot, since every snapshot is full.
	changed chan struct{}

	// mu guards entries and the files of dir: writes to disk and to the map happen
	// together under it, so the two always agree. It is never held while emitting.
	mu      sync.Mutex
	entries map[string]entry
	refused []manifests.Failure // pushes refused for their errors since the last snapshot
	wakes   int                 // times notify was called: tests count what woke Run
}

// NewPush opens the store in dir (created 0700 if needed) and loads every manifest
// stored there. A stored manifest that no longer loads is logged with its located
// errors and skipped; temp files left by a crash mid-write are removed.
func NewPush(dir, node string, log *slog.Logger) (*Push, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create push store %s: %w", dir, err)
	}
	p := &Push{
		dir:       dir,
		node:      node,
		log:       log.With("source", manifests.SourceAPI),
		changed:   make(chan struct{}, 1),
		entries:   map[string]entry{},
		startWait: startWait,
	}
	if err := p.load(); err != nil {
		return nil, err
	}
	return p, nil
}

// Put validates data and, when it holds no error, stores it under name and sends the
// new snapshot. Its pods may read the ConfigMaps and Secrets of every stored manifest,
// its own included (with data replacing what name held). A manifest with errors is not stored: its Result is returned with a
// nil error, for the caller to report every problem. A name that is not a DNS-1123
// label is an error wrapping ErrInvalidName.
func (p *Push) Put(name string, data []byte) (manifests.Result, error) {
	if err := checkName(name); err != nil {
		return manifests.Result{}, err
	}
	res := manifests.Load(data, manifests.Options{NodeName: p.node, Source: p.source(name)})
	var held []manifests.Problem
	if len(res.Errors) == 0 {
		// Not under mu: the wait may be for this store's own snapshot to be merged.
		var err error
		if held, err = p.heldUIDs(name, res); err != nil {
			return manifests.Result{}, fmt.Errorf("store manifest %s: %w: %v; push it again shortly", name, ErrStarting, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(res.Errors) == 0 {
		res.Errors = p.conflicts(name, res)
	}
	if len(res.Errors) == 0 {
		res.Errors = held
	}
	if len(res.Errors) == 0 {
		res.CheckReferences(p.objectsWith(name, res))
	}
	if len(res.Errors) > 0 {
		p.refuse(name, res.Errors)
		return res, nil
	}
	if old, ok := p.entries[name]; ok && bytes.Equal(old.data, data) {
		return res, nil // stored already: nothing changes
	}
	if err := writeAtomic(p.dir, name+manifestExt, data); err != nil {
		return manifests.Result{}, fmt.Errorf("store manifest %s: %w", name, err)
	}
	p.entries[name] = entry{data: bytes.Clone(data), pods: res.Pods, configMaps: res.ConfigMaps, secrets: res.Secrets, classes: res.RuntimeClasses, stored: time.Now()}
	p.log.Info("manifest stored", "name", name, "pods", len(res.Pods))
	p.notify()
	return res, nil
}

// refuse records a push refused for its errors, for the next snapshot to tell once.
// p.mu is held.
func (p *Push) refuse(name string, errs []manifests.Problem) {
	f := manifests.Failure{Location: name, Invalid: true}
	f.Problems = manifests.Messages(errs)
	p.refused = append(p.refused, f)
	p.notify()
}

// Delete removes the manifest stored under name, and so its pods. It returns an error
// wrapping ErrNotFound when there is none. A file that did not load is removed too.
func (p *Push) Delete(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	err := os.Remove(filepath.Join(p.dir, name+manifestExt))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete manifest %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete manifest %s: %w", name, err)
	}
	if err := syncDir(p.dir); err != nil {
		p.log.Warn("manifest removed, but the directory could not be synced", "name", name, "err", err)
	}
	delete(p.entries, name)
	p.log.Info("manifest deleted", "name", name)
	p.notify()
	return nil
}

// List describes every stored manifest, sorted by name.
func (p *Push) List() []Manifest {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Manifest, 0, len(p.entries))
	for name, e := range p.entries {
		m := Manifest{Name: name, Pods: make([]string, 0, len(e.pods)), Stored: e.stored}
		for _, pod := range e.pods {
			m.Pods = append(m.Pods, manifests.Key(pod))
		}
		for _, cm := range e.configMaps {
			m.Objects = append(m.Objects, manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: cm.Namespace, Name: cm.Name}.String())
		}
		for _, s := range e.secrets {
			m.Objects = append(m.Objects, manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: s.Namespace, Name: s.Name}.String())
		}
		for _, rc := range e.classes {
			m.Objects = append(m.Objects, manifests.ObjectRef{Kind: manifests.KindRuntimeClass, Name: rc.Name}.String())
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns the manifest stored under name, as it was pushed.
func (p *Push) Get(name string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[name]
	if !ok {
		return nil, fmt.Errorf("get manifest %s: %w", name, ErrNotFound)
	}
	return bytes.Clone(e.data), nil
}

// Run sends the stored snapshot at once, then a new one after every Put and Delete
// (changes made while emit runs are folded into the next snapshot), until ctx is done.
// It returns nil when ctx is done. One Run per Push.
func (p *Push) Run(ctx context.Context, emit func(context.Context, manifests.Update) error) error {
	for {
		if err := emit(ctx, p.snapshot()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("send snapshot of pushed manifests: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.changed:
		}
	}
}

// snapshot returns copies of every stored pod, in the order of their manifests' names,
// so that the receiver may keep and change them.
func (p *Push) snapshot() manifests.Update {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.entries))
	for name := range p.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	u := manifests.Update{Source: manifests.SourceAPI, Pods: []*corev1.Pod{}, Objects: manifests.NewObjects()}
	u.Failures, p.refused = p.refused, nil
	for _, name := range names {
		e := p.entries[name]
		for _, pod := range e.pods {
			u.Pods = append(u.Pods, pod.DeepCopy())
		}
		u.Objects.Add(e.configMaps, e.secrets) // never changed once stored: shared
		u.Objects.AddRuntimeClasses(e.classes)
	}
	for _, pod := range u.Pods { // those read back from the store were never checked
		manifests.AdmitRuntimeClass(pod, u.Objects)
	}
	return u
}

// objectsWith are the ConfigMaps and Secrets of every stored manifest, with res in
// place of what name holds. Callers hold mu.
func (p *Push) objectsWith(name string, res manifests.Result) manifests.Objects {
	objs := manifests.NewObjects()
	objs.Add(res.ConfigMaps, res.Secrets)
	objs.AddRuntimeClasses(res.RuntimeClasses)
	for have, e := range p.entries {
		if have != name {
			objs.Add(e.configMaps, e.secrets)
			objs.AddRuntimeClasses(e.classes)
		}
	}
	return objs
}

// notify wakes Run to send a snapshot. Callers hold mu.
func (p *Push) notify() {
	p.wakes++
	select {
	case p.changed <- struct{}{}:
	default: // a wake-up is pending already
	}
}

func (p *Push) source(name string) manifests.Source {
	return manifests.Source{Kind: manifests.SourceAPI, Location: name}
}

// conflicts returns an error for each pod, ConfigMap and Secret of res that another
// stored manifest already defines: each belongs to one manifest, never silently to the
// last one pushed. Callers hold mu.
func (p *Push) conflicts(name string, res manifests.Result) []manifests.Problem {
	var out []manifests.Problem
	others := manifests.NewObjects()
	for have, e := range p.entries {
		if have != name {
			others.Add(e.configMaps, e.secrets)
			others.AddRuntimeClasses(e.classes)
		}
	}
	for _, rc := range res.RuntimeClasses {
		if _, ok := others.RuntimeClasses[rc.Name]; ok {
			out = append(out, objectConflict(name, manifests.KindRuntimeClass, "", rc.Name))
		}
	}
	for _, cm := range res.ConfigMaps {
		if others.Has(manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: cm.Namespace, Name: cm.Name}) {
			out = append(out, objectConflict(name, manifests.KindConfigMap, cm.Namespace, cm.Name))
		}
	}
	for _, s := range res.Secrets {
		if others.Has(manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: s.Namespace, Name: s.Name}) {
			out = append(out, objectConflict(name, manifests.KindSecret, s.Namespace, s.Name))
		}
	}
	for _, pod := range res.Pods {
		if owner := p.owner(pod, name); owner != "" {
			detail := fmt.Sprintf("pod %s/%s is already defined by pushed manifest %q; change or delete that one", pod.Namespace, pod.Name, owner)
			out = append(out, manifests.Problem{Location: name, Err: field.Invalid(field.NewPath("metadata", "name"), pod.Name, detail)})
		}
		if holder, ok := p.uidHolder(pod.UID, name); ok {
			out = append(out, manifests.Problem{Location: name, Err: manifests.UIDTaken(pod.UID, holder)})
		}
	}
	return out
}

// uidHolder names the pod of another stored manifest than except that has uid.
// Callers hold mu.
func (p *Push) uidHolder(uid types.UID, except string) (string, bool) {
	for name, e := range p.entries {
		if name == except {
			continue
		}
		for _, have := range e.pods {
			if have.UID == uid {
				return manifests.Origin(have), true
			}
		}
	}
	return "", false
}

// heldUIDs returns an error for each pod of res whose UID Holder says another pod has:
// one another source wants, or one that runs. It waits for HolderKnown up to
// startWait, and fails when Holder cannot tell yet.
func (p *Push) heldUIDs(name string, res manifests.Result) ([]manifests.Problem, error) {
	if p.Holder == nil {
		return nil, nil
	}
	if p.HolderKnown != nil {
		wait := time.NewTimer(p.startWait)
		select {
		case <-p.HolderKnown:
		case <-wait.C: // Holder says why
		}
		wait.Stop()
	}
	var out []manifests.Problem
	for _, pod := range res.Pods {
		holder, err := p.otherHolder(pod, name)
		if err != nil {
			return nil, err
		}
		if holder != "" {
			out = append(out, manifests.Problem{Location: name, Err: manifests.UIDTaken(pod.UID, holder)})
		}
	}
	return out, nil
}

// otherHolder names the pod that Holder says has pod's UID, unless it is pod itself
// as the manifest name held it; "" when there is none.
func (p *Push) otherHolder(pod *corev1.Pod, name string) (string, error) {
	have, err := p.Holder(pod.UID)
	if err != nil || have == nil {
		return "", err
	}
	// The manifest pushed again keeps its pods' UIDs: the runner may not have merged
	// its latest, or still run it as it was. A pod of a manifest removed from the
	// store may still run: its UID is free once it is gone.
	loc := have.Annotations[manifests.AnnotationLocation]
	if have.Annotations[manifests.AnnotationSource] == manifests.SourceAPI && (loc == name || loc == "" && manifests.Key(have) == manifests.Key(pod)) {
		return "", nil
	}
	return manifests.Origin(have), nil
}

func objectConflict(name, kind, namespace, objName string) manifests.Problem {
	ref := manifests.ObjectRef{Kind: kind, Namespace: namespace, Name: objName}
	detail := fmt.Sprintf("%s is already defined by another pushed manifest; change or delete that one", ref)
	return manifests.Problem{Location: name, Err: field.Invalid(field.NewPath("metadata", "name"), objName, detail)}
}

// owner returns the name of the stored manifest other than except that defines pod's
// namespace/name, or "". Callers hold mu.
func (p *Push) owner(pod *corev1.Pod, except string) string {
	for name, e := range p.entries {
		if name == except {
			continue
		}
		for _, have := range e.pods {
			if have.Namespace == pod.Namespace && have.Name == pod.Name {
				return name
			}
		}
	}
	return ""
}

// checkName refuses a name that is not a DNS-1123 label.
func checkName(name string) error {
	if len(name) > 63 || !nameRE.MatchString(name) {
		return fmt.Errorf("manifest name %q: %w: want a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)", name, ErrInvalidName)
	}
	return nil
}
