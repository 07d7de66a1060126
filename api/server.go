// Package api owns staticpod's local HTTP API: the unix socket it always serves on and
// the optional TCP listener (HTTPS with a certificate given; guarded by a bearer token;
// without one, it serves only what the kubelet's read-only port serves), health and
// readiness, the kubelet's read-only /pods shape, container logs, exec in a container,
// events, Prometheus metrics, what pods use (the kubelet's /stats/summary and
// /metrics/resource, from a Stats sampler), the ConfigMaps and Secrets loaded (names and
// keys only), and the /manifests endpoints of the push source, which serve no Secret's
// values.
//
// It reads the runner through the Backend interface, runs exec through Execer and stores
// pushed manifests through ManifestStore, so that it can be tested with fakes. It
// imports runner (for its types), api/wire, manifests, logs and httpsource (for the push
// store's types); it never imports containerd, and decides nothing about what runs.
package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/httpsource"
	"github.com/staticpod/staticpod/logs"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/events"
)

// Limits and timeouts of both listeners.
const (
	// maxBodyBytes caps a request body: a manifest may hold up to 10 MiB, as a file in
	// the manifest directory may, plus room for the multi-document separators.
	maxBodyBytes       = 10<<20 + 64<<10
	maxHeaderBytes     = 64 << 10
	readHeaderTimeout  = 10 * time.Second
	readTimeout        = time.Minute
	writeTimeout       = time.Minute // lifted for log and event streams
	idleTimeout        = 2 * time.Minute
	shutdownGrace      = 5 * time.Second // for in-flight requests once Run's ctx is done
	healthCheckTimeout = 5 * time.Second
)

// Backend is what the API reads of the runner; *runner.Runner implements it.
type Backend interface {
	Pods() []*corev1.Pod        // wanted pods with their statuses, sorted by namespace and name
	Events() *events.Store      // the runner's event store
	Healthy() (bool, time.Time) // whether the PLEG relisted in the last 3 minutes; its last relist
	SourceReady(source string) bool
	Settled() bool // every wanted pod has a status: its worker synced it once, or it was refused
}

var _ Backend = (*runner.Runner)(nil)

// Images lists the runtime's images with their use; *runner.Runner implements it.
type Images interface {
	Images(ctx context.Context) ([]runner.ImageUse, error)
}

var _ Images = (*runner.Runner)(nil)

// ManifestStore is the push source's store of manifests, as httpsource.Push implements
// it, in its own words.
type ManifestStore interface {
	// Put validates data and stores it under name when it holds no error. With
	// Result.Errors non-empty nothing was stored. A name that is not allowed is an error
	// wrapping httpsource.ErrInvalidName.
	Put(name string, data []byte) (manifests.Result, error)
	// Delete removes a stored manifest; one that is absent is an error wrapping
	// httpsource.ErrNotFound.
	Delete(name string) error
	// List describes every stored manifest, sorted by name.
	List() []httpsource.Manifest
	// Get returns a stored manifest's content as it was pushed; one that is absent is
	// an error wrapping httpsource.ErrNotFound.
	Get(name string) ([]byte, error)
}

var _ ManifestStore = (*httpsource.Push)(nil)

// Config configures a Server.
type Config struct {
	Backend Backend       // required
	Store   ManifestStore // nil: the push source is disabled and /manifests answers 404

	Sources        []string                        // sources that must have delivered once for /readyz
	PodLogDir      string                          // logs.DefaultPodsDir when empty
	RuntimeHealthy func(ctx context.Context) error // the container runtime answers; nil: not checked
	Images         Images                          // nil: /images answers 404
	Objects        Objects                         // nil: /configmaps and /secrets answer 404
	Exec           Execer                          // nil: /exec answers 404
	Stats          Stats                           // nil: /stats/summary and /metrics/resource answer 404
	Node           *corev1.Node                    // the node the pods are admitted on, served on /node; nil: /node answers 404
	Registry       *prometheus.Registry            // served on /metrics; a new one when nil
	Log            *slog.Logger

	Socket    string // unix socket path, always served
	Listen    string // optional TCP address
	TokenFile string // bearer token every TCP request must carry; without one TCP serves only publicRoutes

	// The TCP listener's certificate (with its chain) and private key, PEM: with both, it
	// serves HTTPS only. Both or neither.
	TLSCertFile, TLSKeyFile string
}

// Server is the local HTTP API.
type Server struct {
	cfg   Config
	log   *slog.Logger
	token []byte      // SHA-256 of the bearer token; nil when there is no token file
	tls   *tls.Config // of the TCP listener; nil for plain HTTP
	mux   *http.ServeMux

	wrongToken *rateLimit // of the warnings about requests with a wrong token

	// stopping is done once Run begins to shut down: follow streams end with it, so that
	// they do not hold up the graceful shutdown.
	stopping context.Context
	stop     context.CancelFunc

	timeouts timeouts      // of both listeners; tests shorten them
	ready    chan struct{} // closed once Run listens
	tcpAddr  net.Addr      // the TCP listener's address, set before ready is closed

	// Set by Listen, before Run serves on them.
	listeners []net.Listener // the unix socket's, then the TCP one's if any
	sock      fs.FileInfo    // the socket file as bound, removed by Run only if unchanged
}

// timeouts are an http.Server's; streams lift the read and write ones.
type timeouts struct {
	readHeader, read, write, idle time.Duration
}

// New returns a Server for cfg. It reads the token file, if any, and registers the API's
// collectors on cfg.Registry; Run serves.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("new api server: no backend")
	}
	var err error
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.PodLogDir == "" {
		cfg.PodLogDir = logs.DefaultPodsDir
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := &Server{cfg: cfg, log: cfg.Log, ready: make(chan struct{}), wrongToken: newRateLimit(wrongTokenWarnEvery),
		timeouts: timeouts{readHeader: readHeaderTimeout, read: readTimeout, write: writeTimeout, idle: idleTimeout}}
	s.stopping, s.stop = context.WithCancel(context.Background())
	if cfg.TokenFile != "" {
		token, err := readToken(cfg.TokenFile, s.log)
		if err != nil {
			return nil, err
		}
		s.token = token
	}
	if s.tls, err = serverTLS(cfg); err != nil {
		return nil, err
	}
	if err := registerMetrics(cfg.Registry, cfg.Backend); err != nil {
		return nil, err
	}
	s.mux = s.routes()
	return s, nil
}

// Handler is the API as served on the unix socket, without the TCP listener's checks.
func (s *Server) Handler() http.Handler { return s.mux }

// routes are every endpoint, as the unix socket serves them; publicRoutes names those
// the TCP listener serves without a token file.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /readyz/pods", s.readyzPods)
	mux.HandleFunc("GET /pods", s.listPods)
	mux.HandleFunc("GET /pods/{$}", s.listPods)
	mux.HandleFunc("GET /pods/{namespace}/{name}", s.getPod)
	mux.HandleFunc("GET /containerLogs/{namespace}/{name}/{container}", s.containerLogs)
	mux.HandleFunc("POST /exec/{namespace}/{name}/{container}", s.exec)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /node", s.node)
	mux.HandleFunc("GET /images", s.listImages)
	mux.HandleFunc("GET /configmaps", s.listConfigMaps)
	mux.HandleFunc("GET /secrets", s.listSecrets)
	mux.Handle("GET /metrics", metricsHandler(s.cfg.Registry, s.log))
	mux.HandleFunc("GET /metrics/resource", s.resourceMetrics)
	mux.HandleFunc("GET /stats/summary", s.statsSummary)
	mux.HandleFunc("GET /manifests", s.listManifests)
	mux.HandleFunc("GET /manifests/{name}", s.getManifest)
	mux.HandleFunc("PUT /manifests/{name}", s.putManifest)
	mux.HandleFunc("DELETE /manifests/{name}", s.deleteManifest)
	// Profiles of the daemon, as the kubelet's debugging handlers serve them: only to
	// who may use the whole API (the socket, or TCP with the token).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/", fallback(mux))
	return mux
}

// Run serves on the unix socket, and on the TCP address when one is configured, until
// ctx is done; then it ends the streams, gives in-flight requests shutdownGrace to
// finish, removes the socket and returns nil. It is called once.
func (s *Server) Run(ctx context.Context) error {
	defer s.stop()
	if err := s.Listen(); err != nil {
		return err
	}
	defer removeSocket(s.cfg.Socket, s.sock, s.log)
	listeners := s.listeners
	servers := []*http.Server{s.httpServer(s.mux)}
	if len(listeners) > 1 {
		servers = append(servers, s.httpServer(s.tcpGuard(s.mux)))
	}
	s.log.Info("api serving", "socket", s.cfg.Socket, "listen", s.cfg.Listen, "token", s.token != nil, "tls", s.tls != nil)
	switch {
	case len(listeners) > 1 && s.token == nil:
		s.log.Warn("the TCP listener has no --api-token-file: it serves /healthz, /readyz, /metrics and /pods (every pod's spec and status) to anyone who reaches it, and nothing else", "listen", s.tcpAddr.String())
	case len(listeners) > 1 && s.tls == nil && !loopback(s.tcpAddr):
		s.log.Warn("the TCP listener serves plain HTTP beyond this machine: the bearer token crosses the network in the clear; give --tls-cert-file and --tls-private-key-file", "listen", s.tcpAddr.String())
	}
	close(s.ready)

	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	running := len(servers)
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		running--
		runErr = fmt.Errorf("serve api: %w", err)
	}
	s.stop()
	s.shutdown(servers)
	for ; running > 0; running-- {
		<-errc // http.ErrServerClosed
	}
	return runErr
}

// Listen binds the API's socket, and its TCP address if it has one, for Run to serve
// on. A daemon calls it before it acts on anything, so that a second staticpod finds
// out at once that another one serves the socket, and stops before it lists, reaps or
// starts anything. Run listens itself when Listen was not called.
func (s *Server) Listen() error {
	if s.listeners != nil {
		return nil
	}
	if s.cfg.Socket == "" {
		return errors.New("serve api: no socket path")
	}
	unixL, sock, err := listenUnix(s.cfg.Socket)
	if err != nil {
		return err
	}
	listeners := []net.Listener{unixL}
	if s.cfg.Listen != "" {
		tcpL, err := net.Listen("tcp", s.cfg.Listen)
		if err != nil {
			unixL.Close()
			removeSocket(s.cfg.Socket, sock, s.log)
			return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
		}
		s.tcpAddr = tcpL.Addr()
		if s.tls != nil {
			tcpL = tls.NewListener(tcpL, s.tls)
		}
		listeners = append(listeners, tcpL)
	}
	s.listeners, s.sock = listeners, sock
	return nil
}

// shutdown stops the servers, closing what is still open after shutdownGrace.
func (s *Server) shutdown(servers []*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(ctx); err != nil {
			s.log.Warn("api shutdown: closing open connections", "err", err)
			srv.Close()
		}
	}
}

func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.timeouts.readHeader,
		ReadTimeout:       s.timeouts.read,
		WriteTimeout:      s.timeouts.write,
		IdleTimeout:       s.timeouts.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}
