package watcher

import (
	"bytes"
	"slices"

	"github.com/staticpod/staticpod/manifests"
)

// loads remembers what each file of a directory held and how it loaded, so that a
// scan decodes only the files that changed since the last one: the directory is
// scanned again at every file written whole, and writing n manifests one after the
// other would otherwise decode n²/2 of them. A file is compared by its content, not
// by its time stamps, and what is handed out is a copy.
type loads struct {
	node    string
	files   map[string]loaded // by path
	decoded int               // files decoded, for tests
}

type loaded struct {
	data []byte
	file File
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
		return prev.file.clone()
	}
	f := decode(path, l.node, data)
	l.decoded++
	l.files[path] = loaded{data: data, file: f.clone()}
	return f
}

// keep forgets the files not in paths.
func (l *loads) keep(paths []string) {
	if l == nil {
		return
	}
	for path := range l.files {
		if !slices.Contains(paths, path) {
			delete(l.files, path)
		}
	}
}

// clone copies a loaded file deeply enough that a scan may change what it hands on.
func (f File) clone() File {
	f.Result = f.Result.Clone()
	return f
}

// decode loads the content of the file at path.
func decode(path, node string, data []byte) File {
	src := manifests.Source{Kind: manifests.SourceFile, Location: path}
	return File{Path: path, Result: manifests.Load(data, manifests.Options{NodeName: node, Source: src})}
}
