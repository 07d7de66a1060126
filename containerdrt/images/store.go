package images

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/distribution/reference"

	"github.com/staticpod/staticpod/runner"
)

// DefaultRegistryConfigDir is where containerd's own pulls read registry hosts
// configuration (<dir>/<host>/hosts.toml), and so where a node's operator has put it.
const DefaultRegistryConfigDir = "/etc/containerd/certs.d"

// Config configures pulls and imports.
type Config struct {
	RegistryConfig     string   // extra docker config.json path (--registry-config); searched first
	RootDir            string   // staticpod's root dir: its config.json is searched next, as the kubelet's is
	RegistryConfigDir  string   // containerd's host configuration: <dir>/<host>/hosts.toml (--registry-config-dir); "" = none
	InsecureRegistries []string // hosts (host, host:port or CIDR) talked to over plain HTTP (--insecure-registry)
	Snapshotter        string   // "" = containerd's default
	ImageDir           string   // --image-dir: tarballs imported at start and when added
	UserFilesDir       string   // where UserFiles copies images' /etc/passwd and /etc/group; "" = nowhere
	// The kubelet's credential provider plugins: their CredentialProviderConfig file (or
	// directory of them) and the directory of their binaries. "" = none.
	CredentialProviderConfig string
	CredentialProviderBinDir string
}

// Store pulls, imports and inspects images, and measures, lists and removes them for
// image garbage collection. It keeps no state of its own beyond the credential plugins'
// cache and what the image dir's archives brought: what is present is always asked of
// containerd.
type Store struct {
	client    *client.Client
	cfg       Config
	log       *slog.Logger
	providers []*credentialProvider // the credential provider plugins, in their config's order

	scanned     chan struct{} // closed once the image dir's archives present at start are imported
	scannedOnce sync.Once

	archiveMu sync.Mutex          // guards archives
	archives  map[string][]string // archive path in the image dir -> the images it brought

	facts factCache // what the images used hold, by manifest digest: see Facts
	users userFiles // the copies of the images' user files, by manifest digest: see UserFiles
}

// New returns the image store of c. It loads the credential provider plugins of cfg and
// fails as the kubelet does on a bad plugin configuration: every error it returns comes
// from cfg.
func New(c *client.Client, cfg Config, log *slog.Logger) (*Store, error) {
	providers, err := loadCredentialProviders(cfg.CredentialProviderConfig, cfg.CredentialProviderBinDir)
	if err != nil {
		return nil, err
	}
	s := newStore(c, cfg, log)
	s.providers = providers
	return s, nil
}

// newStore returns a Store without credential provider plugins.
func newStore(c *client.Client, cfg Config, log *slog.Logger) *Store {
	return &Store{
		client: c,
		cfg:    cfg,
		log:    log,

		scanned:  make(chan struct{}),
		archives: map[string][]string{},
	}
}

// Imported is closed once the archives in the image dir at start have been imported (at
// once without an image dir), so that pods do not try to pull what a device was shipped.
func (s *Store) Imported() <-chan struct{} { return s.scanned }

func (s *Store) markScanned() { s.scannedOnce.Do(func() { close(s.scanned) }) }

// Name is the name containerd stores a pod's image under, normalized as pulls
// normalize it ("busybox" -> "docker.io/library/busybox:latest"); "" for a string that
// names no image.
func Name(image string) string {
	name, err := normalizeRef(image)
	if err != nil {
		return ""
	}
	return name
}

// normalizeRef returns ref fully qualified, as containerd's CRI stores images:
// busybox -> docker.io/library/busybox:latest. An invalid ref wraps runner.ErrImagePull.
func normalizeRef(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", &imageError{
			class: runner.ErrImagePull,
			msg:   fmt.Sprintf("invalid image name %q", ref),
			err:   err,
		}
	}
	return named.String(), nil
}

// imageError is a failure to make an image present. Its message is the one the kubelet
// would show (the runner reports it as the container's waiting message); errors.Is
// matches its class (runner.ErrImagePull or runner.ErrImageNeverPull) and its cause.
type imageError struct {
	class error  // runner.ErrImagePull or runner.ErrImageNeverPull
	msg   string // what failed, e.g. `failed to pull and unpack image "x"`
	err   error  // the cause, with the registry's message; may be nil
}

func (e *imageError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *imageError) Unwrap() []error {
	if e.err == nil {
		return []error{e.class}
	}
	return []error{e.class, e.err}
}
