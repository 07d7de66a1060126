package api

import (
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// serverTLS is the TCP listener's TLS configuration from cfg's certificate and key
// files, nil when neither is given. The files are read now, so that a wrong one stops
// the daemon at start, and again at a handshake after either has changed, so that a
// renewed certificate is served without a restart (as the kubelet reloads its
// --tls-cert-file). Only HTTP/1.1 is offered: exec upgrades its connection.
func serverTLS(cfg Config) (*tls.Config, error) {
	switch {
	case cfg.TLSCertFile == "" && cfg.TLSKeyFile == "":
		return nil, nil
	case cfg.TLSCertFile == "" || cfg.TLSKeyFile == "":
		return nil, errors.New("api tls: --tls-cert-file and --tls-private-key-file go together: give both")
	case cfg.Listen == "":
		return nil, errors.New("api tls: --tls-cert-file serves the TCP listener: give --listen too")
	}
	kp := &keyPair{certFile: cfg.TLSCertFile, keyFile: cfg.TLSKeyFile, log: cfg.Log}
	if _, err := kp.load(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get() },
	}, nil
}

// keyPair is a certificate and its key, read again from their files when they change.
type keyPair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex // guards what follows
	cert    *tls.Certificate
	modTime [2]time.Time // of the files as last read
}

// get returns the certificate, read again if a file changed since; a renewal that does
// not load (a half-written file) keeps the last good one, with a warning.
func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.modTime == k.stat() {
		return k.cert, nil
	}
	if _, err := k.loadLocked(); err != nil {
		k.log.Warn("api tls: keep serving the certificate loaded before", "err", err)
	}
	return k.cert, nil
}

func (k *keyPair) load() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loadLocked()
}

func (k *keyPair) loadLocked() (*tls.Certificate, error) {
	mod := k.stat()
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return nil, fmt.Errorf("api tls: load %s and %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.modTime = &cert, mod
	return k.cert, nil
}

func (k *keyPair) stat() [2]time.Time {
	var mod [2]time.Time
	for i, f := range []string{k.certFile, k.keyFile} {
		if info, err := os.Stat(f); err == nil {
			mod[i] = info.ModTime()
		}
	}
	return mod
}

// loopback reports whether addr is a loopback address, where plain HTTP leaves the
// machine never.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
