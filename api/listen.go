package api

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	socketDirMode = 0o700
	socketMode    = 0o600
	// probeTimeout bounds the connection attempt that tells a live server on the socket
	// path from a stale socket file left by one that died.
	probeTimeout = time.Second
)

// listenUnix listens on the unix socket path with mode 0600 from its first moment: it
// binds a temporary name beside path, sets the mode, then renames it over path, so no
// client ever finds the socket with the umask's mode. A socket file whose server is gone
// is replaced; one that a live server answers on is not. It returns the listener and the
// socket's file info, by which removeSocket recognises it.
func listenUnix(path string) (*net.UnixListener, fs.FileInfo, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, socketDirMode); err != nil {
		return nil, nil, fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	if err := checkStale(path); err != nil {
		return nil, nil, err
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+"."+strconv.Itoa(os.Getpid()))
	os.Remove(tmp)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false) // the path is renamed; removeSocket removes it
	fail := func(err error) (*net.UnixListener, fs.FileInfo, error) {
		l.Close()
		os.Remove(tmp)
		return nil, nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(tmp, socketMode); err != nil {
		return fail(err)
	}
	info, err := os.Lstat(tmp)
	if err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return l, info, nil
}

// checkStale returns nil when path is free or holds a socket nobody answers on (which
// listenUnix then replaces), and an error when it is something else or a live server.
func checkStale(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check socket %s: %w", path, err)
	}
	if info.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("check socket %s: it exists and is not a socket; refusing to replace it", path)
	}
	conn, err := net.DialTimeout("unix", path, probeTimeout)
	if err == nil {
		conn.Close()
		return fmt.Errorf("check socket %s: another server answers on it (is staticpod already running?)", path)
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return nil // stale: its server is gone
	}
	return fmt.Errorf("check socket %s: %w", path, err)
}

// removeSocket removes the socket at path if it is still the one this server created.
func removeSocket(path string, ours fs.FileInfo, log *slog.Logger) {
	cur, err := os.Lstat(path)
	if err != nil || !os.SameFile(cur, ours) {
		return // gone, or another server's by now
	}
	if err := os.Remove(path); err != nil {
		log.Warn("remove api socket", "path", path, "err", err)
	}
}

// readToken reads the bearer token from path and returns its SHA-256, which requests are
// compared with in constant time.
func readToken(path string, log *slog.Logger) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read api token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return nil, fmt.Errorf("read api token file %s: it is empty", path)
	}
	if info, err := os.Stat(path); err == nil && info.Mode().Perm()&0o077 != 0 {
		log.Warn("api token file is readable by others than its owner", "path", path, "mode", info.Mode().Perm())
	}
	sum := sha256.Sum256([]byte(token))
	return sum[:], nil
}
