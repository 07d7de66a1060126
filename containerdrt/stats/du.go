package stats

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// DiskUsage is what a directory tree or a filesystem holds.
type DiskUsage struct {
	Bytes  uint64 // allocated bytes (blocks of 512, as du counts)
	Inodes uint64 // inodes: files, directories, links and the top directory itself
}

// Du measures the tree at path as the kubelet's fs.DiskUsage does (what its volume
// and log stats report): every inode once (hard links counted once), its allocated
// blocks of 512 bytes, the top directory included, never crossing into another
// filesystem (a mount inside it) nor following a symlink. A file removed while it
// walks is not an error.
func Du(path string) (DiskUsage, error) {
	var u DiskUsage
	var top unix.Stat_t
	if err := unix.Lstat(path, &top); err != nil {
		return u, fmt.Errorf("du %s: %w", path, err)
	}
	seen := map[uint64]bool{} // inodes with more than one link, counted once
	err := filepath.Walk(path, func(p string, info fs.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("stat %s: no stat_t", p)
		}
		if st.Dev != top.Dev {
			if info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if st.Nlink > 1 && !info.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		u.Bytes += uint64(st.Blocks) * 512
		u.Inodes++
		return nil
	})
	if err != nil {
		return DiskUsage{}, fmt.Errorf("du %s: %w", path, err)
	}
	return u, nil
}

// FsInfo is a filesystem's size and what is free on it, from statfs, as cAdvisor's
// fs info has it.
type FsInfo struct {
	Capacity, Available, Used uint64 // bytes; Available to unprivileged users
	Inodes, InodesFree        uint64
}

// StatFs measures the filesystem holding path.
func StatFs(path string) (FsInfo, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FsInfo{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	return FsInfo{
		Capacity: st.Blocks * unit, Available: st.Bavail * unit, Used: (st.Blocks - st.Bfree) * unit,
		Inodes: st.Files, InodesFree: st.Ffree,
	}, nil
}
