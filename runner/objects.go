package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/manifests"
)

// ReasonFailedMount is the event of a volume that could not be brought up to date, as
// the kubelet names it.
const ReasonFailedMount = "FailedMount"

// ReasonFailedToRetrieveImagePullSecret is the event of image pull secrets a pod names
// that are not beside it, as the kubelet names it; staticpod tells of those that hold
// no registry credentials (of another type) with it too.
const ReasonFailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret"

// Object describes a ConfigMap or Secret a source provides, by name and keys only: a
// Secret's values never leave the runner this way. Clients read it as wire.Object.
type Object = wire.Object

// ConfigMaps describes the ConfigMaps every source provides, sorted by source,
// namespace and name.
func (r *Runner) ConfigMaps() []Object { return r.describe(manifests.KindConfigMap) }

// Secrets describes the Secrets every source provides, with their keys and never their
// values.
func (r *Runner) Secrets() []Object { return r.describe(manifests.KindSecret) }

func (r *Runner) describe(kind string) []Object {
	out := []Object{}
	for src, objs := range r.pub.allObjects() {
		if kind == manifests.KindConfigMap {
			for _, cm := range objs.ConfigMaps {
				keys := slices.Collect(maps.Keys(cm.Data))
				keys = append(keys, slices.Collect(maps.Keys(cm.BinaryData))...)
				out = append(out, Object{Kind: kind, Namespace: cm.Namespace, Name: cm.Name, Source: src, Keys: sorted(keys)})
			}
			continue
		}
		for _, s := range objs.Secrets {
			out = append(out, Object{Kind: kind, Namespace: s.Namespace, Name: s.Name, Source: src, Type: string(s.Type), Keys: sorted(slices.Collect(maps.Keys(s.Data)))})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Source != b.Source {
			return sourceOrder[a.Source] < sourceOrder[b.Source]
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

func sorted(keys []string) []string {
	slices.Sort(keys)
	if keys == nil {
		return []string{}
	}
	return keys
}

// syncVolumes brings the pod's configMap, secret and projected volumes up to date with
// the objects of its source, once something of the pod was created (PreparePod
// wrote them first). It asks the runtime only when what the pod reads
// changed since the last sync that worked, and after a restart of staticpod, whose
// first sync of each pod always asks; it hashes what the pod reads only when a source
// sent objects. A failure (an object gone) leaves the volume as it was; it is told once
// per distinct error, and retried at each sync.
func (w *worker) syncVolumes(ctx context.Context, pod *corev1.Pod, rt PodRuntime) {
	if !manifests.ReadsObjects(pod) || len(rt.Containers) == 0 {
		return
	}
	objs, gen := w.pub.objectsWithGen(pod)
	if w.volumesSynced && gen == w.volumesGen {
		return
	}
	fp := manifests.Referenced(pod, objs).Fingerprint()
	if w.volumesSynced && fp == w.volumes {
		w.volumesGen = gen
		return
	}
	if err := w.rt.SyncVolumes(ctx, pod, objs); err != nil {
		if msg := err.Error(); msg != w.mountErr {
			w.mountErr = msg
			w.warn("", ReasonFailedMount, fmt.Sprintf("MountVolume.SetUp failed: %v", err))
		}
		return
	}
	if w.mountErr != "" {
		w.mountErr = ""
		w.log.Info("volumes up to date again")
	}
	w.volumes, w.volumesGen, w.volumesSynced = fp, gen, true
}

// pullSecrets returns the pod's image pull secrets found beside it, for a pull, and
// warns of those it names that are missing or hold no registry credentials: as on the
// kubelet, the pull goes on without them, with the node's credentials. The warning
// names the Secrets, never what they hold; it is given at each pull, and the events
// fold its repeats.
func (w *worker) pullSecrets(pod *corev1.Pod) []*corev1.Secret {
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return nil
	}
	secrets, missing, unusable := manifests.PullSecrets(pod, w.pub.objectsOf(pod))
	if len(missing) > 0 {
		w.warn("", ReasonFailedToRetrieveImagePullSecret, fmt.Sprintf(
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", ")))
	}
	if len(unusable) > 0 {
		w.warn("", ReasonFailedToRetrieveImagePullSecret, fmt.Sprintf(
			"Some image pull secrets (%s) are not of type %s or %s and hold no registry credentials; attempting to pull the image may not succeed.",
			strings.Join(unusable, ", "), corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg))
	}
	return secrets
}
