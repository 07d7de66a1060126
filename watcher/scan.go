package watcher

import (
	"fmt"

	"github.com/staticpod/staticpod/manifests"
)

// File is one manifest file as read by a scan.
type File struct {
	Path    string
	Result  manifests.Result // empty when ReadErr is set
	ReadErr error            // the file could not be read (or is too large)
}

// Failed reports whether the file cannot be used as it is: it was not readable or
// holds an error. Its pods, if it had good ones before, should keep their last good
// spec.
func (f File) Failed() bool {
	return f.ReadErr != nil || len(f.Result.Errors) > 0
}

// Conflict is a pod defined by two files: the first file in sorted order wins, and the
// later definition is refused and reported, never silently preferred.
type Conflict struct {
	Pod     string // namespace/name of the static pod (with its node suffix)
	Kept    string // the file whose pod runs
	Dropped string // the file whose definition is ignored
}

func (c Conflict) Error() string {
	return fmt.Sprintf("%s: pod %s is already defined in %s; this definition is ignored", c.Dropped, c.Pod, c.Kept)
}

// Snapshot is everything one scan of a manifest path found.
type Snapshot struct {
	Files     []File
	Conflicts []Conflict
}

// Scan reads and loads every manifest file of path (see ListFiles) for node. Pods that
// a previous file already defines are dropped from the later file and reported as
// conflicts.
func Scan(path, node string) (Snapshot, error) {
	return scan(path, node, nil)
}

// scan is Scan, decoding only the files that changed since cache last saw them (all of
// them with no cache).
func scan(path, node string, cache *loads) (Snapshot, error) {
	paths, err := ListFiles(path)
	if err != nil {
		return Snapshot{}, err
	}
	defer cache.keep(paths)
	var snap Snapshot
	owner := map[string]string{} // namespace/name -> file that defines it
	for _, p := range paths {
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
	return snap, nil
}

func load(path, node string) File {
	data, err := ReadFile(path)
	if err != nil {
		return File{Path: path, ReadErr: err}
	}
	return decode(path, node, data)
}
