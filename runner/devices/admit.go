package devices

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ReasonUnexpectedAdmission is the kubelet's reason for a pod whose devices could not
// be allocated at admission (its admission.ErrorReasonUnexpected).
const ReasonUnexpectedAdmission = "UnexpectedAdmissionError"

// Refusal is why a pod's devices could not be allocated, in the kubelet's words.
type Refusal struct {
	Reason  string
	Message string
}

func refused(err error) *Refusal {
	return &Refusal{Reason: ReasonUnexpectedAdmission, Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
}

// Requests are the device plugin resources a container's limits name, with how many
// devices of each (extended resources are whole and their request is their limit).
func Requests(c *corev1.Container) map[string]int {
	var out map[string]int
	for name, q := range c.Resources.Limits {
		if !IsExtended(string(name)) || q.Value() <= 0 {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		out[string(name)] = int(q.Value())
	}
	return out
}

// Admit gives each container of pod that asks for a plugin's resource its devices,
// as the kubelet's device manager does at admission: what the pod has already (kept
// in the checkpoint) stays its own; otherwise free healthy devices are chosen, the
// plugin's preference asked when it offers one, and its Allocate called. A pod that
// cannot have them all gets none and is refused: no plugin registered the resource,
// too few healthy devices are free, or the plugin failed. A nil Manager admits all.
func (m *Manager) Admit(ctx context.Context, pod *corev1.Pod) *Refusal {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var made []*Assignment
	for _, c := range allContainers(pod) {
		reqs := Requests(c)
		for _, res := range slices.Sorted(maps.Keys(reqs)) {
			if a := m.assigned[pod.UID][c.Name][res]; a != nil && len(a.DeviceIDs) == reqs[res] {
				continue
			}
			a, err := m.allocate(ctx, pod.UID, c.Name, res, reqs[res])
			if err != nil {
				for _, a := range made {
					delete(m.assigned[a.Pod][a.Container], a.Resource)
				}
				return refused(err)
			}
			m.put(a)
			made = append(made, a)
		}
	}
	if len(made) > 0 {
		if err := m.save(); err != nil {
			for _, a := range made {
				delete(m.assigned[a.Pod][a.Container], a.Resource)
			}
			return refused(err)
		}
		for _, a := range made {
			m.log.Info("devices allocated", "uid", a.Pod, "container", a.Container, "resource", a.Resource, "devices", a.DeviceIDs)
		}
	}
	return nil
}

// allocate chooses n devices of res for a container and calls the plugin's Allocate
// for them. m.mu is held.
func (m *Manager) allocate(ctx context.Context, uid types.UID, container, res string, n int) (*Assignment, error) {
	r := m.resources[res]
	if r == nil {
		return nil, fmt.Errorf("cannot allocate unregistered device %s", res)
	}
	if r.ep == nil || r.ep.client == nil {
		return nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", res)
	}
	used := m.inUse(res)
	free := sets.New[string]()
	for id, healthy := range r.devices {
		if healthy && !used[id] {
			free.Insert(id)
		}
	}
	if free.Len() < n {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", res, n, free.Len())
	}
	ids := sets.List(free)[:n]
	if r.ep.options().GetPreferredAllocationAvailable {
		pref, err := r.ep.preferred(ctx, sets.List(free), nil, n)
		if err != nil {
			return nil, fmt.Errorf("rpc error: %w", err)
		}
		// The kubelet takes the preferred devices that are free, then fills up.
		chosen := sets.New[string]()
		for _, id := range pref {
			if free.Has(id) && chosen.Len() < n {
				chosen.Insert(id)
			}
		}
		for _, id := range sets.List(free) {
			if chosen.Len() == n {
				break
			}
			chosen.Insert(id)
		}
		ids = sets.List(chosen)
	}
	resp, err := r.ep.allocate(ctx, ids)
	if err != nil {
		return nil, err
	}
	return &Assignment{Pod: uid, Container: container, Resource: res, DeviceIDs: ids, Allocation: fromResponse(resp)}, nil
}

// Container is what the plugins allocated to a container of the pod, merged in the
// order of the resources' names; PreStartContainer is called first for the plugins
// that ask for it. Empty when it has no devices (or m is nil).
func (m *Manager) Container(ctx context.Context, uid types.UID, container string) (Allocation, error) {
	var out Allocation
	if m == nil {
		return out, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byResource := m.assigned[uid][container]
	for _, res := range slices.Sorted(maps.Keys(byResource)) {
		a := byResource[res]
		// A plugin not registered (yet: after a restart of staticpod) is not asked; the
		// container gets what its Allocate answered before.
		if r := m.resources[res]; r != nil && r.ep != nil && r.ep.client != nil && r.ep.options().PreStartRequired {
			if err := r.ep.preStart(ctx, a.DeviceIDs); err != nil {
				return Allocation{}, fmt.Errorf("pre-start devices %s of container %s: %w", res, container, err)
			}
		}
		out.merge(a.Allocation)
	}
	return out, nil
}

// Release frees the devices of every pod keep does not want kept: the kubelet's
// devices of pods no longer active. The runner keeps those of the pods it wants,
// runs or stops. It reports whether it freed any: pods refused for want of devices
// may be admitted now.
func (m *Manager) Release(keep func(types.UID) bool) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var freed []types.UID
	for uid := range m.assigned {
		if !keep(uid) {
			delete(m.assigned, uid)
			freed = append(freed, uid)
		}
	}
	if len(freed) == 0 {
		return false
	}
	if err := m.save(); err != nil {
		m.log.Error("devices freed, checkpoint not written", "err", err)
	}
	for _, uid := range freed {
		m.log.Info("devices freed", "uid", uid)
	}
	return true
}

// Assigned are the devices given to the pod's containers: container -> resource ->
// device IDs.
func (m *Manager) Assigned(uid types.UID) map[string]map[string][]string {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[string][]string{}
	for c, byResource := range m.assigned[uid] {
		for res, a := range byResource {
			if out[c] == nil {
				out[c] = map[string][]string{}
			}
			out[c][res] = slices.Clone(a.DeviceIDs)
		}
	}
	return out
}

// allContainers are the pod's init containers, then its containers, as the kubelet
// allocates them.
func allContainers(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}
