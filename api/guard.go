package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// wrongTokenWarnEvery is how often at most a request with a wrong bearer token is
// logged: a client retrying with a stale token, or someone guessing, must not flood the
// log. The warnings held back are counted in the next one.
const wrongTokenWarnEvery = time.Minute

// publicRoutes are the routes (as registered in routes) that the TCP listener serves
// without a token file: what the kubelet's read-only port serves, health, metrics and
// the pods with their statuses (one pod by name is a part of the list). Everything else
// (container logs, exec, events, pushed manifests, the names of ConfigMaps and
// Secrets, images, profiles) needs the token over TCP. The unix socket serves every route.
var publicRoutes = map[string]bool{
	"GET /healthz":                 true,
	"GET /readyz":                  true,
	"GET /readyz/pods":             true,
	"GET /metrics":                 true,
	"GET /pods":                    true,
	"GET /pods/{$}":                true,
	"GET /pods/{namespace}/{name}": true,
}

// tcpGuard is what stands between TCP clients and the API: with a token file, every
// request must carry the token; without one, only the public routes are served and
// everything else is refused as unauthorized, since no token could authorize it.
// The route is the one mux picks for the request, so that no spelling of a path (dots,
// slashes, escapes) reaches another route than the one checked.
func (s *Server) tcpGuard(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.token != nil && !s.authorized(r):
			unauthorized(w, "a valid bearer token is required: send Authorization: Bearer <token from --api-token-file>")
		case s.token == nil && !public(mux, r):
			unauthorized(w, fmt.Sprintf("%s %s needs a bearer token, and this daemon has no --api-token-file: without one, the TCP listener serves only /healthz, /readyz, /metrics and /pods; use the unix socket, or start staticpod with --api-token-file", r.Method, r.URL.Path))
		default:
			mux.ServeHTTP(w, r)
		}
	})
}

// public reports whether the route mux takes r to is one of publicRoutes. A path that
// mux would redirect counts as the route it redirects to: the redirect is all it gets.
func public(mux *http.ServeMux, r *http.Request) bool {
	_, pattern := mux.Handler(r)
	return publicRoutes[pattern]
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="staticpod"`)
	writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, msg)
}

// authorized reports whether r carries the bearer token. Both sides are hashed first so
// that the comparison takes the same time whatever the token's length. A wrong token is
// logged, at most once per wrongTokenWarnEvery; a missing one is not.
func (s *Server) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	const scheme = "Bearer "
	if len(auth) <= len(scheme) || !strings.EqualFold(auth[:len(scheme)], scheme) {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(auth[len(scheme):])))
	if subtle.ConstantTimeCompare(sum[:], s.token) == 1 {
		return true
	}
	if ok, held := s.wrongToken.allow(); ok {
		s.log.Warn("api request with a wrong bearer token", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path,
			"suppressed", held)
	}
	return false
}

// rateLimit lets one report through per interval and counts those it holds back, for
// the next one to say how many there were.
type rateLimit struct {
	interval time.Duration
	now      func() time.Time // time.Now; tests replace it

	mu   sync.Mutex // guards last and held
	last time.Time  // when the last report went through; zero before the first
	held int        // reports held back since then
}

func newRateLimit(interval time.Duration) *rateLimit {
	return &rateLimit{interval: interval, now: time.Now}
}

// allow reports whether a report may go through now and, if so, how many were held back
// since the last one that did.
func (l *rateLimit) allow() (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.held++
		return false, 0
	}
	held, l.last, l.held = l.held, now, 0
	return true, held
}
