package watcher

import (
	"bytes"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// loads remembers what each file of a directory held and how it loaded, so that a
// scan decodes only the files that changed since the last one: the directory is
// scanned again at every file written whole, and writing n manifests one after the
// other would otherwise decode n²/2 of them. A file is compared by its content, not
// by its time stamps, and what is handed out is a copy.
//
// The pods and the objects of a file are fingerprinted once, when it is decoded, and
// their fingerprints handed on with the file (File.prints, File.objects), for the same
// reason: a scan compares every file's pods and objects with those it took before, and
// marshalling and hashing them all at every scan made a burst of n files cost n²
// fingerprints.
type loads struct {
	node    string
	files   map[string]loaded // by path
	decoded int               // files decoded, for tests
}

type loaded struct {
	data []byte
	file File // as decoded, with its pods' fingerprints
}

func newLoads(node string) *loads {
	return &loads{node: node, files: map[string]loaded{}}
}

// load reads and loads one file, decoding it only if its content changed.
func (l *loads) load(path string) File {
	data, err := ReadFile(path)
	if err != nil {
		delete(l.files, path)
		return File{Path: path, ReadErr: err}
	}
	if prev, ok := l.files[path]; ok && bytes.Equal(prev.data, data) {
		// A copy: a scan drops pods and objects from the slices it is handed, and
		// admission changes pods (see Snapshot.resolve), and what it sends is kept.
		return prev.file.clone()
	}
	f := decode(path, l.node, data)
	l.decoded++
	f.prints = make(map[*corev1.Pod]string, len(f.Result.Pods))
	for _, pod := range f.Result.Pods {
		f.prints[pod] = podPrint(pod)
	}
	f.objects, f.objectsKnown = objectsPrint(f.Result), true
	l.files[path] = loaded{data: data, file: f.clone()}
	return f
}

// keep forgets the files not in paths.
func (l *loads) keep(paths []string) {
	if l == nil {
		return
	}
	listed := make(map[string]bool, len(paths))
	for _, path := range paths {
		listed[path] = true
	}
	for path := range l.files {
		if !listed[path] {
			delete(l.files, path)
		}
	}
}

// clone copies a loaded file deeply enough that a scan may change what it hands on.
// The fingerprints go with the copies of their pods.
func (f File) clone() File {
	pods := f.Result.Pods
	f.Result = f.Result.Clone()
	if f.prints != nil {
		prints := make(map[*corev1.Pod]string, len(pods))
		for i, pod := range pods { // Clone copies the pods in order
			if fp, ok := f.prints[pod]; ok {
				prints[f.Result.Pods[i]] = fp
			}
		}
		f.prints = prints
	}
	return f
}

// print is the fingerprint of one of the file's pods (see manifests.Fingerprint): the
// one computed when the file was decoded, or, if there is none or the pod changed
// since, one computed now.
func (f File) print(pod *corev1.Pod) string {
	if fp, ok := f.prints[pod]; ok {
		return fp
	}
	return podPrint(pod)
}

// podPrintsOf lists the fingerprints of the file's pods, in order.
func (f File) podPrintsOf() []string {
	out := make([]string, len(f.Result.Pods))
	for i, pod := range f.Result.Pods {
		out[i] = f.print(pod)
	}
	return out
}

// decode loads the content of the file at path.
func decode(path, node string, data []byte) File {
	src := manifests.Source{Kind: manifests.SourceFile, Location: path}
	return File{Path: path, Result: manifests.Load(data, manifests.Options{NodeName: node, Source: src})}
}
