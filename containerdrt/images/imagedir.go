package images

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/distribution/reference"
	"github.com/fsnotify/fsnotify"
)

const (
	// importSettle is how long a file in the image dir must go without events before it
	// is imported: a copy in progress keeps writing, so the archive is read once complete.
	importSettle = time.Second
	// importTimeout bounds the import and unpack of one archive.
	importTimeout = 10 * time.Minute
	// labelArchive, on an image, is the archive of the image dir it was last imported
	// from (an absolute path): the image is pinned while it is there.
	labelArchive = "io.staticpod.image-archive"
	// labelArchiveVersion, on an image imported from an archive, is the archive's
	// version it came from and how many images that brought (archiveVersion): a
	// staticpod started again finds an archive unchanged since, whose images are all
	// still there and unpacked, and does not import it again.
	labelArchiveVersion = "io.staticpod.image-archive-version"
)

// importFile imports the image archive at path and unpacks its images for the
// snapshotter, and returns the names it imported. The archive is an OCI image layout or a
// docker-archive (docker save), plain or gzipped (detected by its magic bytes). Images are
// named by containerd's io.containerd.image.name annotation, else by a full reference in
// org.opencontainers.image.ref.name, else, in a docker-archive, by manifest.json's
// RepoTags, all normalized (busybox:1 -> docker.io/library/busybox:1). An image named only
// by a tag is skipped: nothing says which repository it belongs to. Only the host's
// platform is imported from a multi-platform archive.
func (s *Store) importFile(ctx context.Context, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	stamp := stampOf(fi)
	r, err := decompress(f)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	archive, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	imported, err := s.client.Import(ctx, r, client.WithImageRefTranslator(ociRefName),
		client.WithImageLabels(map[string]string{labelArchive: archive}))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if len(imported) == 0 {
		return nil, fmt.Errorf("import %s: no named image in the archive", path)
	}
	var names []string
	for _, img := range imported {
		if err := s.unpack(ctx, client.NewImage(s.client, img)); err != nil {
			return names, fmt.Errorf("import %s: %w", path, err)
		}
		names = append(names, img.Name)
	}
	// Once all are in: an import cut short leaves images no later start takes for whole.
	is := s.client.ImageService()
	for _, img := range imported {
		img.Labels = map[string]string{labelArchiveVersion: archiveVersion(stamp, len(imported))}
		if _, err := is.Update(ctx, img, "labels."+labelArchiveVersion); err != nil {
			return names, fmt.Errorf("import %s: record the archive's version on image %s: %w", path, img.Name, err)
		}
	}
	return names, nil
}

// archiveVersion is the value of labelArchiveVersion for an archive of that version
// that brought count images.
func archiveVersion(v fileStamp, count int) string {
	return fmt.Sprintf("size=%d,mtime=%d,images=%d", v.size, v.mtime.UnixNano(), count)
}

// importedBefore returns the names of the images an earlier import of this version of
// the archive at path brought, when they are all still there and unpacked; else nil.
func (s *Store) importedBefore(ctx context.Context, path string, v fileStamp) []string {
	archive, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	imgs, err := s.client.ImageService().List(ctx, fmt.Sprintf("labels.%q==%q", labelArchive, archive))
	if err != nil || len(imgs) == 0 {
		return nil
	}
	want := archiveVersion(v, len(imgs))
	names := make([]string, 0, len(imgs))
	for _, img := range imgs {
		if img.Labels[labelArchiveVersion] != want {
			return nil // another version's, or one of its images is gone
		}
		if ok, err := client.NewImage(s.client, img).IsUnpacked(ctx, s.cfg.Snapshotter); err != nil || !ok {
			return nil
		}
		names = append(names, img.Name)
	}
	return names
}

// decompress returns r's content, gunzipped if it starts with gzip's magic bytes.
func decompress(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	return zr, nil
}

// ociRefName names an image from an OCI layout's org.opencontainers.image.ref.name: a
// full reference is normalized; a bare tag ("v1", "latest"), which OCI allows, names no
// repository and gives "", so the image is not named.
func ociRefName(name string) string {
	if !strings.ContainsAny(name, "/:@") {
		return ""
	}
	named, err := reference.ParseDockerRef(name)
	if err != nil {
		return ""
	}
	return named.String()
}

// Run imports every archive in the image dir, then watches the dir and imports archives
// as they are added or replaced, once they have settled (written and closed, or renamed
// in), until ctx is done; it then returns nil. An archive whose images an earlier
// import of the same version brought, all still there, is not imported again
// (importedBefore): a restart reads no archive twice. It creates the dir if missing. With no
// image dir configured it returns nil at once. Dot files, *.tmp, *.part and editor
// leftovers are ignored. A file that fails to import is logged once, as a warning with its
// reason, and retried only when it changes; it never stops Run. Removing an archive
// leaves its images in containerd, no longer pinned against image garbage collection.
//
// After each import, arrived (when not nil) is told which images came in, as a function
// that reports whether a pod's image string names one of them, so that pods waiting for
// them need not wait out a back-off.
func (s *Store) Run(ctx context.Context, arrived func(provides func(image string) bool)) error {
	defer s.markScanned()
	dir := s.cfg.ImageDir
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("image dir %s: %w", dir, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch image dir %s: %w", dir, err)
	}
	defer w.Close()
	// Watch before the first scan, so that a file added during it is not missed.
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch image dir %s: %w", dir, err)
	}
	d := &dirImports{Store: s, arrived: arrived, seen: map[string]fileStamp{}, pending: map[string]time.Time{}}
	if err := d.scan(ctx, dir); err != nil {
		return err
	}
	s.markScanned()
	return d.watch(ctx, w)
}

// fileStamp identifies one version of a file.
type fileStamp struct {
	size  int64
	mtime time.Time
}

func stampOf(fi os.FileInfo) fileStamp { return fileStamp{size: fi.Size(), mtime: fi.ModTime()} }

// dirImports is Run's state. It is owned by Run's goroutine and needs no lock.
type dirImports struct {
	*Store
	arrived func(provides func(image string) bool) // see Run; may be nil
	seen    map[string]fileStamp                   // the version of each file last imported or tried
	pending map[string]time.Time                   // files that changed, by when they will have settled
}

// scan imports every archive in dir, in name order.
func (d *dirImports) scan(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read image dir %s: %w", dir, err)
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return nil
		}
		if isArchiveName(e.Name()) {
			d.importOne(ctx, filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// watch imports the files that fsnotify reports once they settle, until ctx is done.
func (d *dirImports) watch(ctx context.Context, w *fsnotify.Watcher) error {
	settled := time.NewTimer(importSettle)
	settled.Stop()
	defer settled.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			d.note(ev, time.Now())
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			d.log.Warn("watch image dir", "dir", d.cfg.ImageDir, "err", err)
		case now := <-settled.C:
			d.importSettled(ctx, now)
		}
		d.arm(settled)
	}
}

// note records what ev says of a file: a file created, written or renamed in will be
// imported when it settles; one removed or renamed away is forgotten.
func (d *dirImports) note(ev fsnotify.Event, now time.Time) {
	if !isArchiveName(filepath.Base(ev.Name)) {
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		delete(d.pending, ev.Name)
		delete(d.seen, ev.Name)
		d.pin(ev.Name, nil)
		return
	}
	if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write) || ev.Has(fsnotify.Chmod) {
		d.pending[ev.Name] = now.Add(importSettle)
	}
}

// arm sets t to fire when the first pending file settles, or stops it if none is pending.
func (d *dirImports) arm(t *time.Timer) {
	if len(d.pending) == 0 {
		t.Stop()
		return
	}
	var first time.Time
	for _, due := range d.pending {
		if first.IsZero() || due.Before(first) {
			first = due
		}
	}
	t.Reset(time.Until(first))
}

// importSettled imports the pending files that have settled by now.
func (d *dirImports) importSettled(ctx context.Context, now time.Time) {
	for path, due := range d.pending {
		if due.After(now) {
			continue
		}
		delete(d.pending, path)
		d.importOne(ctx, path)
	}
}

// importOne imports the regular file at path unless this version of it was already
// tried, and logs the outcome.
func (d *dirImports) importOne(ctx context.Context, path string) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return // gone again, or a directory
	}
	stamp := stampOf(fi)
	if d.seen[path] == stamp {
		return
	}
	first := d.seen[path] == (fileStamp{})
	d.seen[path] = stamp
	start := time.Now()
	ictx, cancel := context.WithTimeout(ctx, importTimeout)
	defer cancel()
	if first {
		// A staticpod started again: an archive unchanged since its images came in is
		// not read again (a boot would wait for every archive of the dir to be read).
		if names := d.importedBefore(ictx, path, stamp); names != nil {
			d.log.Info("image archive unchanged since it was imported", "file", path, "images", names)
			d.pin(path, names)
			if d.arrived != nil {
				d.arrived(provides(names))
			}
			return
		}
	}
	names, err := d.importFile(ictx, path)
	switch {
	case err != nil && ctx.Err() != nil:
		delete(d.seen, path) // interrupted by shutdown: try again next start
	case err != nil:
		d.log.Warn("image archive not imported", "file", path, "err", err)
	default:
		d.log.Info("imported images", "file", path, "images", names,
			"duration", time.Since(start).Round(time.Millisecond))
	}
	if err == nil {
		d.pin(path, names)
	}
	if len(names) > 0 && d.arrived != nil {
		d.arrived(provides(names))
	}
}

// pin records the images the archive at path brought, nil once it is gone: image
// garbage collection keeps them while it is there.
func (s *Store) pin(path string, names []string) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	s.archiveMu.Lock()
	defer s.archiveMu.Unlock()
	if names == nil {
		delete(s.archives, path)
		return
	}
	s.archives[path] = names
}

// pinned reports whether an archive in the image dir brings the image named name, whose
// labelArchive label is archive. The archives imported since staticpod started say
// which images they bring; an archive whose import failed this time (the disk was full,
// say) still pins the images it brought before, as long as it is there.
func (s *Store) pinned(name, archive string) bool {
	s.archiveMu.Lock()
	defer s.archiveMu.Unlock()
	for _, names := range s.archives {
		if slices.Contains(names, name) {
			return true
		}
	}
	if archive == "" || s.cfg.ImageDir == "" {
		return false
	}
	if _, imported := s.archives[archive]; imported {
		return false // its latest version does not bring this image
	}
	dir, err := filepath.Abs(s.cfg.ImageDir)
	if err != nil || filepath.Dir(archive) != dir {
		return false
	}
	fi, err := os.Stat(archive)
	return err == nil && fi.Mode().IsRegular()
}

// provides returns whether a pod's image string, normalized, is one of names.
func provides(names []string) func(image string) bool {
	return func(image string) bool {
		name, err := normalizeRef(image)
		return err == nil && slices.Contains(names, name)
	}
}

// isArchiveName reports whether a file named name in the image dir is worth importing:
// not a dot file (as temporary files of atomic writers are), nor a partial download or
// editor leftover.
func isArchiveName(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") {
		return false
	}
	for _, ext := range []string{".tmp", ".part", ".swp", ".crdownload"} {
		if strings.HasSuffix(name, ext) {
			return false
		}
	}
	return true
}
