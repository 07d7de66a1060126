package watcher

import (
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// File is one manifest file as read by a scan.
type File struct {
	Path    string
	Result  manifests.Result // empty when ReadErr is set
	ReadErr error            // the file could not be read (or is too large)

	prints map[*corev1.Pod]string // fingerprints of pods of Result as decoded (see loads)
	// The fingerprint of Result's objects as decoded (see loads), when objectsKnown:
	// until a scan drops one of them.
	objects      string
	objectsKnown bool
}

// Failed reports whether the file cannot be used as it is: it was not readable or
// holds an error. Its pods, if it had good ones before, should keep their last good
// spec.
func (f File) Failed() bool {
	return f.ReadErr != nil || len(f.Result.Errors) > 0
}

// Conflict is a pod, ConfigMap or Secret defined by two files: the first file in sorted
// order wins, and the later definition is refused and reported, never silently
// preferred.
type Conflict struct {
	Pod     string // namespace/name of the static pod (with its node suffix)
	Object  string // or the kind and namespace/name of a ConfigMap or Secret
	Kept    string // the file whose definition is used
	Dropped string // the file whose definition is ignored
}

func (c Conflict) Error() string {
	if c.Object != "" {
		return fmt.Sprintf("%s: %s is already defined in %s; this definition is ignored", c.Dropped, c.Object, c.Kept)
	}
	return fmt.Sprintf("%s: pod %s is already defined in %s; this definition is ignored", c.Dropped, c.Pod, c.Kept)
}

// Snapshot is everything one scan of a manifest path found.
type Snapshot struct {
	Files     []File
	Conflicts []Conflict
}

// Scan reads and loads every manifest file of paths for node, as one source: the files
// of each path (see ListFiles), path after path in the order given. Pods and objects
// that an earlier file already defines are dropped from the later file and reported as
// conflicts, and the pods' references to ConfigMaps and Secrets are checked against the
// objects of every file (see resolve).
//
// It is the one loader of manifest files: the directory source scans its one path, and
// validate and once scan the paths they are given, so that several paths load exactly
// as their files would from one directory of the daemon.
func Scan(paths []string, node string) (Snapshot, error) {
	return scan(paths, node, nil)
}

// scan is Scan, decoding only the files that changed since cache last saw them (all of
// them with no cache).
func scan(paths []string, node string, cache *loads) (Snapshot, error) {
	var files []string
	seen := map[string]bool{}
	for _, path := range paths {
		listed, err := ListFiles(path)
		if err != nil {
			return Snapshot{}, err
		}
		for _, f := range listed {
			if !seen[filepath.Clean(f)] { // a file named twice (a directory and a file of it) is read once
				seen[filepath.Clean(f)] = true
				files = append(files, f)
			}
		}
	}
	defer cache.keep(files)
	var snap Snapshot
	owner := map[string]string{} // namespace/name -> file that defines it
	for _, p := range files {
		var f File
		if cache != nil {
			f = cache.load(p)
		} else {
			f = load(p, node)
		}
		kept := f.Result.Pods[:0]
		for _, pod := range f.Result.Pods {
			key := manifests.Key(pod)
			if first, ok := owner[key]; ok {
				snap.Conflicts = append(snap.Conflicts, Conflict{Pod: key, Kept: first, Dropped: p})
				continue
			}
			owner[key] = p
			kept = append(kept, pod)
		}
		f.Result.Pods = kept
		snap.Files = append(snap.Files, f)
	}
	snap.dropObjectConflicts()
	snap.resolve(snap.Objects())
	return snap, nil
}

// dropObjectConflicts drops from later files the ConfigMaps, Secrets and RuntimeClasses
// an earlier file defines, as conflicts.
func (s *Snapshot) dropObjectConflicts() {
	owner := map[string]string{} // kind namespace/name -> the file that defines it
	for i := range s.Files {
		f := &s.Files[i]
		take := func(ref manifests.ObjectRef) bool {
			if first, ok := owner[ref.String()]; ok {
				s.Conflicts = append(s.Conflicts, Conflict{Object: ref.String(), Kept: first, Dropped: f.Path})
				return false
			}
			owner[ref.String()] = f.Path
			return true
		}
		cms := f.Result.ConfigMaps[:0]
		for _, cm := range f.Result.ConfigMaps {
			if take(manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: cm.Namespace, Name: cm.Name}) {
				cms = append(cms, cm)
			}
		}
		secrets := f.Result.Secrets[:0]
		for _, sec := range f.Result.Secrets {
			if take(manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: sec.Namespace, Name: sec.Name}) {
				secrets = append(secrets, sec)
			}
		}
		classes := f.Result.RuntimeClasses[:0]
		for _, rc := range f.Result.RuntimeClasses {
			if take(manifests.ObjectRef{Kind: manifests.KindRuntimeClass, Name: rc.Name}) {
				classes = append(classes, rc)
			}
		}
		if len(cms) < len(f.Result.ConfigMaps) || len(secrets) < len(f.Result.Secrets) || len(classes) < len(f.Result.RuntimeClasses) {
			f.objectsKnown = false // some were dropped: not the objects as decoded
		}
		f.Result.ConfigMaps, f.Result.Secrets, f.Result.RuntimeClasses = cms, secrets, classes
	}
}

// Objects are the ConfigMaps, Secrets and RuntimeClasses of every file of the snapshot.
func (s Snapshot) Objects() manifests.Objects {
	objs := manifests.NewObjects()
	for _, f := range s.Files {
		objs.Add(f.Result.ConfigMaps, f.Result.Secrets)
		objs.AddRuntimeClasses(f.Result.RuntimeClasses)
	}
	return objs
}

// resolve checks the references of every file's pods to ConfigMaps and Secrets against
// objs: a pod that reads one that is missing makes its file fail. A pod that passes
// gets the overhead of its RuntimeClass, if it had none: its fingerprint as decoded is
// forgotten then, for File.print to compute that of the pod as it now is.
func (s *Snapshot) resolve(objs manifests.Objects) {
	for i := range s.Files {
		f := &s.Files[i]
		var bare []*corev1.Pod // pods without an overhead, that admission may give one
		for _, pod := range f.Result.Pods {
			if pod.Spec.Overhead == nil && f.prints[pod] != "" {
				bare = append(bare, pod)
			}
		}
		f.Result.CheckReferences(objs)
		for _, pod := range bare {
			if pod.Spec.Overhead != nil {
				delete(f.prints, pod)
			}
		}
	}
}

func load(path, node string) File {
	data, err := ReadFile(path)
	if err != nil {
		return File{Path: path, ReadErr: err}
	}
	return decode(path, node, data)
}
