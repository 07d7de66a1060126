package poddir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A volume of projected files (configMap, secret, projected) is laid out as the
// kubelet's AtomicWriter lays it out, so that programs written for a cluster (which
// watch ..data to reload) work unchanged: the files live in a hidden timestamped
// directory, ..data is a symlink to it, and each name at the top of the volume is a
// symlink through ..data. An update writes a new timestamped directory and renames a
// new ..data symlink over the old one: rename is atomic, so a reader sees the old
// files or the new ones, never a mix.
const (
	dataLink        = "..data"
	newDataLink     = "..data_tmp"
	timestampLayout = "..2006_01_02_15_04_05."
	projectedDirMod = 0o755 // the kubelet's: any container user may look up its files
)

// projectedFile is one file of a volume: its content and mode.
type projectedFile struct {
	data []byte
	mode fs.FileMode
}

// writeProjected makes dir (which must exist) hold exactly files, keyed by their path
// in the volume, and reports whether it changed anything. It is idempotent: a volume
// that already holds the same files is left alone. o owns every file (the group a pod's
// fsGroup, as the kubelet sets the ownership of such volumes; both mapped in a user
// namespace of the pod's own), and, in a user namespace, the directories and links too.
func writeProjected(dir string, files map[string]projectedFile, o owner) (bool, error) {
	for path := range files {
		if err := checkProjectedPath(path); err != nil {
			return false, err
		}
	}
	old, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", dataLink, err)
	}
	if old != "" {
		same, err := holds(filepath.Join(dir, old), files, o)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
	}
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format(timestampLayout))
	if err != nil {
		return false, fmt.Errorf("create data dir: %w", err)
	}
	if err := writeFiles(ts, files, o); err != nil {
		os.RemoveAll(ts)
		return false, err
	}
	if err := linkTopNames(dir, files, o); err != nil {
		os.RemoveAll(ts)
		return false, err
	}
	tmp := filepath.Join(dir, newDataLink)
	_ = os.Remove(tmp) // left by a write that did not finish
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		os.RemoveAll(ts)
		return false, fmt.Errorf("link new data dir: %w", err)
	}
	if err := o.dirOwner().lchown(tmp); err != nil {
		os.Remove(tmp)
		os.RemoveAll(ts)
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		os.Remove(tmp)
		os.RemoveAll(ts)
		return false, fmt.Errorf("swap %s: %w", dataLink, err)
	}
	return true, prune(dir, filepath.Base(ts), files)
}

// checkProjectedPath refuses a path that would leave the volume or clash with its
// hidden names; validation refuses them first, this guards the host.
func checkProjectedPath(path string) error {
	switch {
	case path == "" || filepath.IsAbs(path):
		return fmt.Errorf("invalid file path %q: must be a relative path", path)
	case slices.Contains(strings.Split(path, "/"), ".."):
		return fmt.Errorf("invalid file path %q: must not contain '..'", path)
	case strings.HasPrefix(path, ".."):
		return fmt.Errorf("invalid file path %q: must not start with '..'", path)
	}
	return nil
}

// holds reports whether the data dir ts holds exactly files, with their content,
// modes and owners.
func holds(ts string, files map[string]projectedFile, o owner) (bool, error) {
	found, differs := 0, false
	err := filepath.WalkDir(ts, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(ts, path)
		want, ok := files[rel]
		if !ok {
			differs = true // a file that should not be there
			return fs.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if info.Mode().Perm() != want.mode.Perm() || !bytes.Equal(data, want.data) || !o.owns(info) {
			differs = true
			return fs.SkipAll
		}
		found++
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("compare %s: %w", ts, err)
	}
	return !differs && found == len(files), nil
}

// writeFiles writes files into the new data dir ts.
func writeFiles(ts string, files map[string]projectedFile, o owner) error {
	if err := os.Chmod(ts, projectedDirMod); err != nil {
		return fmt.Errorf("chmod %s: %w", ts, err)
	}
	for path, f := range files {
		full := filepath.Join(ts, path)
		if err := os.MkdirAll(filepath.Dir(full), projectedDirMod); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(full), err)
		}
		if err := os.WriteFile(full, f.data, f.mode); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if !o.none() {
			if err := os.Chown(full, o.uid, o.gid); err != nil {
				return fmt.Errorf("chown %s: %w", path, err)
			}
		}
		if err := os.Chmod(full, f.mode); err != nil { // the umask must not narrow it
			return fmt.Errorf("chmod %s: %w", path, err)
		}
	}
	if dirs := o.dirOwner(); !dirs.none() {
		return filepath.WalkDir(ts, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			return dirs.lchown(path)
		})
	}
	return nil
}

// linkTopNames makes each name at the top of the volume a symlink through ..data.
func linkTopNames(dir string, files map[string]projectedFile, o owner) error {
	for _, top := range topNames(files) {
		link := filepath.Join(dir, top)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataLink, top), link); err != nil {
			return fmt.Errorf("link %s: %w", top, err)
		}
		if err := o.dirOwner().lchown(link); err != nil {
			return err
		}
	}
	return nil
}

// prune removes what the swap left behind: top names no longer projected and data dirs
// other than the current one (the previous one, and any a crash left).
func prune(dir, current string, files map[string]projectedFile) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	keep := map[string]bool{dataLink: true, current: true}
	for _, top := range topNames(files) {
		keep[top] = true
	}
	var errs []error
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func topNames(files map[string]projectedFile) []string {
	tops := map[string]bool{}
	for path := range files {
		top, _, _ := strings.Cut(path, "/")
		tops[top] = true
	}
	return slices.Sorted(maps.Keys(tops))
}
