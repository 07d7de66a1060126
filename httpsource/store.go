package httpsource

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/staticpod/staticpod/manifests"
)

// Temp files are ".<name>.yaml.<random>.tmp": hidden, and never taken for a manifest.
const (
	tempPrefix = "."
	tempSuffix = ".tmp"
)

// writeAtomic replaces dir/file with data so that a crash at any point leaves either
// the old content or the new one, never a mix: the data goes to a temp file in the same
// directory, is synced, renamed over the file (rename is atomic within a directory),
// and the directory is synced so the rename itself is durable.
func writeAtomic(dir, file string, data []byte) (err error) {
	tmp, err := os.CreateTemp(dir, tempPrefix+file+".*"+tempSuffix) // mode 0600
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, file)); err != nil {
		return fmt.Errorf("rename %s: %w", tmp.Name(), err)
	}
	return syncDir(dir)
}

// syncDir makes the entries of dir (a rename, a removal) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// load reads every manifest of the store's directory into entries. Only files named
// <name>.yaml with a valid name are manifests; leftover temp files of a write that did
// not finish are removed, anything else is left alone and logged. A manifest that does
// not load is logged with each located problem and skipped.
func (p *Push) load() error {
	dirents, err := os.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("read push store %s: %w", p.dir, err)
	}
	sort.Slice(dirents, func(i, j int) bool { return dirents[i].Name() < dirents[j].Name() })
	for _, de := range dirents {
		file := de.Name()
		name, isManifest := strings.CutSuffix(file, manifestExt)
		switch {
		case strings.HasPrefix(file, tempPrefix) && strings.HasSuffix(file, tempSuffix):
			p.removeTemp(file)
		case !de.Type().IsRegular() || !isManifest || checkName(name) != nil:
			p.log.Warn("not a pushed manifest; ignored", "path", filepath.Join(p.dir, file))
		default:
			p.loadOne(name)
		}
	}
	return nil
}

// loadOne loads the manifest stored under name. Conflicts with a manifest loaded before
// it (possible only by hand edits) drop the later manifest whole, as Put would have.
func (p *Push) loadOne(name string) {
	path := filepath.Join(p.dir, name+manifestExt)
	data, info, err := readManifest(path)
	if err != nil {
		p.log.Warn("stored manifest cannot be read; skipped", "name", name, "err", err)
		return
	}
	res := manifests.Load(data, manifests.Options{NodeName: p.node, Source: p.source(name)})
	if len(res.Errors) == 0 {
		res.Errors = p.conflicts(name, res)
	}
	if len(res.Errors) > 0 {
		for _, e := range res.Errors {
			p.log.Warn("stored manifest is invalid; skipped", "name", name, "err", e.Error())
		}
		return
	}
	// References are not checked here: a manifest loaded before the one that holds its
	// objects would be refused. The runner reports what is missing when the pod starts.
	p.entries[name] = entry{data: data, pods: res.Pods, configMaps: res.ConfigMaps, secrets: res.Secrets, classes: res.RuntimeClasses, stored: info.ModTime()}
}

func (p *Push) removeTemp(file string) {
	path := filepath.Join(p.dir, file)
	if err := os.Remove(path); err != nil {
		p.log.Warn("cannot remove a temp file left by an unfinished write", "path", path, "err", err)
		return
	}
	p.log.Info("removed a temp file left by an unfinished write", "path", path)
}

// readManifest reads a stored manifest, refusing one over manifests.MaxManifestBytes.
func readManifest(path string) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, manifests.MaxManifestBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > manifests.MaxManifestBytes {
		return nil, nil, fmt.Errorf("read %s: over %d bytes", path, manifests.MaxManifestBytes)
	}
	return data, info, nil
}
