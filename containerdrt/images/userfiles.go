package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/opencontainers/go-digest"

	"github.com/staticpod/staticpod/runner"
)

// userFileNames are the files of an image that a container's user and groups are
// looked up in (containerd's oci.WithUser, WithUserID, WithAdditionalGIDs read no
// others).
var userFileNames = []string{"etc/passwd", "etc/group"}

// maxUserFile bounds what UserFiles copies of one file; an image whose file is larger
// has it read from each container's own snapshot, as without UserFiles.
const maxUserFile = 4 << 20

// errUserFileContent marks a copy that failed on what the image holds, which another
// try would find again.
var errUserFileContent = errors.New("user files of the image")

// userFiles holds, by manifest digest, the directories UserFiles filled, or the one
// copy under way.
type userFiles struct {
	mu   sync.Mutex
	dirs map[string]*userFilesEntry
}

type userFilesEntry struct {
	done chan struct{} // closed once dir is known
	dir  string        // "" when the copy failed: the next call tries again
}

// UserFiles returns a directory that holds the /etc/passwd and /etc/group of img (those
// it has, as regular files, symlinks within the image followed) at etc/passwd and
// etc/group, for a container's user and groups to be looked up there rather than in
// a temporary mount of each container's snapshot: a burst of pods from one image then
// mounts the image once, not once or twice a container. What an image holds follows
// from its manifest digest, so the copy is made once per digest, under
// Config.UserFilesDir, and kept (it is a few kilobytes, in the run dir).
//
// It returns "" (and no error) where it cannot help: an image without a digest, a
// store that knows no snapshotter or no directory, a file it cannot copy as the
// lookups would read it. The lookups then read the container's snapshot, as they
// always did, and fail there as they would have.
func (s *Store) UserFiles(ctx context.Context, img runner.Image, f Facts) string {
	d, err := digest.Parse(img.Digest)
	if err != nil || s.cfg.Snapshotter == "" || s.cfg.UserFilesDir == "" || f.ChainID == "" {
		return ""
	}
	s.users.mu.Lock()
	if s.users.dirs == nil {
		s.users.dirs = map[string]*userFilesEntry{}
	}
	e, ok := s.users.dirs[d.String()]
	if !ok {
		e = &userFilesEntry{done: make(chan struct{})}
		s.users.dirs[d.String()] = e
	}
	s.users.mu.Unlock()
	if ok {
		select {
		case <-e.done:
			return e.dir
		case <-ctx.Done():
			return ""
		}
	}
	dir, err := s.copyUserFiles(ctx, d, f.ChainID)
	if err != nil {
		s.log.Debug("image's user files not copied: containers look them up in their snapshots", "image", img.Ref, "err", err)
		if !errors.Is(err, errUserFileContent) { // what the image holds will not change
			s.users.mu.Lock()
			delete(s.users.dirs, d.String())
			s.users.mu.Unlock()
		}
	}
	e.dir = dir
	close(e.done)
	return dir
}

// copyUserFiles copies the user files of the image whose layers have chain ID chainID
// from a read-only view of them into UserFilesDir/<digest>, unless an earlier copy is
// there.
func (s *Store) copyUserFiles(ctx context.Context, d digest.Digest, chainID string) (string, error) {
	dir := filepath.Join(s.cfg.UserFilesDir, d.Encoded())
	if _, err := os.Stat(dir); err == nil {
		return dir, nil // copied before this staticpod started: the digest says it is the same
	}
	if err := os.MkdirAll(s.cfg.UserFilesDir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(s.cfg.UserFilesDir, ".copy-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // gone once renamed
	ctx, done, err := s.client.WithLease(ctx)
	if err != nil {
		return "", err
	}
	defer done(context.WithoutCancel(ctx))
	sn := s.client.SnapshotService(s.cfg.Snapshotter)
	key := "staticpod-user-files-" + d.Encoded() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	mounts, err := sn.View(ctx, key, chainID)
	if err != nil {
		return "", fmt.Errorf("view of %s: %w", chainID, err)
	}
	defer sn.Remove(context.WithoutCancel(ctx), key)
	err = mount.WithReadonlyTempMount(ctx, mounts, func(root string) error { return copyUserFileSet(root, tmp) })
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(dir); statErr == nil {
			return dir, nil // another copy of the same digest came first
		}
		return "", err
	}
	return dir, nil
}

// copyUserFileSet copies each of userFileNames that the image root at root has into
// the same place under dst, reading it as the lookups do: through the root, whose
// symlinks may not lead out of it. A file the image does not have is not copied, so
// that the lookups find it missing there too.
func copyUserFileSet(root, dst string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, name := range userFileNames {
		data, err := readUserFile(r, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // missing here too; any other failure (a link out of the root) leaves the lookups to the snapshot
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %w", errUserFileContent, name, err)
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readUserFile reads name under r whole, if it is a regular file no larger than
// maxUserFile.
func readUserFile(r *os.Root, name string) ([]byte, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxUserFile {
		return nil, fmt.Errorf("not a regular file of at most %d bytes", maxUserFile)
	}
	return io.ReadAll(io.LimitReader(f, maxUserFile+1))
}
