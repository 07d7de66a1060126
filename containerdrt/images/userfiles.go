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

// userFiles holds, by manifest digest, the directories UserFiles filled: "" while a
// copy is under way, or after one that failed on what the image holds.
type userFiles struct {
	mu     sync.Mutex
	dirs   map[string]string
	copies sync.WaitGroup // the copies under way
}

// userFilesTimeout bounds one copy.
const userFilesTimeout = time.Minute

// UserFiles returns a directory that holds the /etc/passwd and /etc/group of img (those
// it has, as regular files, symlinks within the image followed) at etc/passwd and
// etc/group, for a container's user and groups to be looked up there rather than in
// a temporary mount of each container's snapshot: a burst of pods from one image then
// mounts the image once, not once or twice a container. What an image holds follows
// from its manifest digest, so the copy is made once per digest, under
// Config.UserFilesDir, and kept (it is a few kilobytes, in the run dir).
//
// It never waits for the copy: the first call for an image starts it in the
// background and returns "", as every call does until it is made, so that no
// container's start waits for a view of the image (tens of milliseconds). It also
// returns "" where it cannot help: an image without a digest, a store that knows no
// snapshotter or no directory, a file it cannot copy as the lookups would read it.
// The lookups then read the container's snapshot, as they always did, and fail there
// as they would have.
func (s *Store) UserFiles(ctx context.Context, img runner.Image, f Facts) string {
	d, err := digest.Parse(img.Digest)
	if err != nil || s.cfg.Snapshotter == "" || s.cfg.UserFilesDir == "" || f.ChainID == "" {
		return ""
	}
	key := d.String()
	s.users.mu.Lock()
	defer s.users.mu.Unlock()
	if dir, ok := s.users.dirs[key]; ok {
		return dir
	}
	if s.users.dirs == nil {
		s.users.dirs = map[string]string{}
	}
	dir := filepath.Join(s.cfg.UserFilesDir, d.Encoded())
	if _, err := os.Stat(dir); err == nil {
		s.users.dirs[key] = dir // copied before this staticpod started: the digest says it is the same
		return dir
	}
	s.users.dirs[key] = ""
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), userFilesTimeout)
	s.users.copies.Go(func() {
		defer cancel()
		err := s.copyUserFiles(ctx, d, f.ChainID, dir)
		s.users.mu.Lock()
		defer s.users.mu.Unlock()
		switch {
		case err == nil:
			s.users.dirs[key] = dir
		case errors.Is(err, errUserFileContent): // what the image holds will not change
			s.log.Debug("image's user files not copied: containers look them up in their snapshots", "image", img.Ref, "err", err)
		default:
			s.log.Debug("image's user files not copied: the next container tries again", "image", img.Ref, "err", err)
			delete(s.users.dirs, key)
		}
	})
	return ""
}

// Wait waits for the copies of user files under way.
func (s *Store) Wait() {
	s.users.copies.Wait()
}

// copyUserFiles copies the user files of the image whose layers have chain ID chainID
// from a read-only view of them into dir, under UserFilesDir.
func (s *Store) copyUserFiles(ctx context.Context, d digest.Digest, chainID, dir string) error {
	if err := os.MkdirAll(s.cfg.UserFilesDir, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(s.cfg.UserFilesDir, ".copy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone once renamed
	ctx, done, err := s.client.WithLease(ctx)
	if err != nil {
		return err
	}
	defer done(context.WithoutCancel(ctx))
	sn := s.client.SnapshotService(s.cfg.Snapshotter)
	key := "staticpod-user-files-" + d.Encoded() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	mounts, err := sn.View(ctx, key, chainID)
	if err != nil {
		return fmt.Errorf("view of %s: %w", chainID, err)
	}
	defer sn.Remove(context.WithoutCancel(ctx), key)
	err = mount.WithReadonlyTempMount(ctx, mounts, func(root string) error { return copyUserFileSet(root, tmp) })
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(dir); statErr == nil {
			return nil // a copy of the same digest made meanwhile
		}
		return err
	}
	return nil
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
