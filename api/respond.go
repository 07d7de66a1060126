package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusOf is a failure as the apiserver reports one, so that clients written for it
// read staticpod's errors too.
func statusOf(code int, reason metav1.StatusReason, msg string) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  msg,
		Reason:   reason,
		Code:     int32(code),
	}
}

// writeStatus answers a failure with a metav1.Status body.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, statusOf(code, reason, msg))
}

// writeNotFound answers 404 as the apiserver does: `pods "x" not found`.
func writeNotFound(w http.ResponseWriter, kind, name string) {
	writeNotFoundMsg(w, kind, name, fmt.Sprintf("%s %q not found", kind, name))
}

func writeNotFoundMsg(w http.ResponseWriter, kind, name, msg string) {
	st := statusOf(http.StatusNotFound, metav1.StatusReasonNotFound, msg)
	st.Details = &metav1.StatusDetails{Name: name, Kind: kind}
	writeJSON(w, http.StatusNotFound, st)
}

func writeBadRequest(w http.ResponseWriter, msg string) {
	writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, msg)
}

func writeInternal(w http.ResponseWriter, msg string) {
	writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, msg)
}

// writeJSON answers with v as JSON. An error writing the body means the client is gone;
// there is nobody left to tell.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// writeText answers the plain-text health endpoints.
func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, text+"\n")
}

// fallback answers what no route takes: 405 with the allowed methods for a known path,
// else 404, both as a metav1.Status rather than the ServeMux's plain text.
func fallback(mux *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no endpoint %s", r.URL.Path))
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
	}
}

// boolParam reads a boolean query parameter: absent or empty is false.
func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

// stream prepares w for a response that lasts as long as the client wants: it lifts the
// connection's deadlines (a passed read deadline would cancel the request's context),
// and returns a context that also ends when the server shuts down.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc) {
	rc := http.NewResponseController(w)
	for _, set := range []func(time.Time) error{rc.SetReadDeadline, rc.SetWriteDeadline} {
		if err := set(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
			s.log.Debug("lift deadline of a stream", "path", r.URL.Path, "err", err)
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.stopping, cancel)
	return ctx, func() { stop(); cancel() }
}

// flushWriter sends what is written at once, for streams read as they come.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func newFlushWriter(w http.ResponseWriter) *flushWriter {
	return &flushWriter{w: w, rc: http.NewResponseController(w)}
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.Flush()
}

func (f *flushWriter) Flush() error {
	if err := f.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
