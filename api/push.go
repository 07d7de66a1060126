package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/staticpod/staticpod/httpsource"
	"github.com/staticpod/staticpod/manifests"
)

// Problem is one error or warning of a pushed manifest, in the shape `staticpod validate
// -o json` prints.
type Problem struct {
	Document int    `json:"document,omitempty"` // 1-based YAML document; 0 for the whole body
	Field    string `json:"field,omitempty"`    // field path, spec.containers[0].image
	Message  string `json:"message"`
	Text     string `json:"text"` // the whole located message
}

// Pushed answers a stored PUT: the pods the manifest defines.
type Pushed struct {
	Name     string    `json:"name"`
	Pods     []string  `json:"pods"` // namespace/name, as they run
	Warnings []Problem `json:"warnings"`
}

// Invalid answers a PUT refused with 422: a metav1.Status of reason Invalid whose causes
// and errors list every problem.
type Invalid struct {
	metav1.Status `json:",inline"`
	Errors        []Problem `json:"errors"`
}

func toProblems(ps []manifests.Problem) []Problem {
	out := make([]Problem, 0, len(ps))
	for _, p := range ps {
		out = append(out, Problem{Document: p.Doc, Field: p.Field(), Message: p.Message(), Text: p.Error()})
	}
	return out
}

func (s *Server) listManifests(w http.ResponseWriter, _ *http.Request) {
	if s.pushDisabled(w) {
		return
	}
	list := s.cfg.Store.List()
	if list == nil {
		list = []httpsource.Manifest{}
	}
	writeJSON(w, http.StatusOK, list)
}

// getManifest answers a pushed manifest as it was pushed, but for the values of its
// Secrets, which are masked (see redactSecrets).
func (s *Server) getManifest(w http.ResponseWriter, r *http.Request) {
	name, ok := s.manifestName(w, r)
	if !ok {
		return
	}
	data, err := s.cfg.Store.Get(name)
	if err != nil {
		s.storeError(w, "get", name, err)
		return
	}
	data, err = redactSecrets(data)
	if err != nil { // it was valid when stored: the file was changed by hand
		s.log.Error("serve a pushed manifest", "name", name, "err", err)
		writeInternal(w, fmt.Sprintf("manifest %q cannot be read to hide its Secrets' values, so it is not served: %v", name, err))
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(data)
}

// putManifest stores a manifest under its name when every pod in it is valid; else it
// answers 422 with every problem and nothing changes.
func (s *Server) putManifest(w http.ResponseWriter, r *http.Request) {
	name, ok := s.manifestName(w, r)
	if !ok {
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeStatus(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
				fmt.Sprintf("manifest %q is larger than %d bytes", name, tooLarge.Limit))
			return
		}
		writeBadRequest(w, fmt.Sprintf("read manifest %q: %v", name, err))
		return
	}
	res, err := s.cfg.Store.Put(name, data)
	if err != nil {
		s.storeError(w, "put", name, err)
		return
	}
	if len(res.Errors) > 0 {
		writeJSON(w, http.StatusUnprocessableEntity, invalid(name, res.Errors))
		return
	}
	pushed := Pushed{Name: name, Pods: make([]string, 0, len(res.Pods)), Warnings: toProblems(res.Warnings)}
	for _, p := range res.Pods {
		pushed.Pods = append(pushed.Pods, manifests.Key(p))
	}
	s.log.Info("manifest pushed", "name", name, "pods", pushed.Pods)
	writeJSON(w, http.StatusOK, pushed)
}

func (s *Server) deleteManifest(w http.ResponseWriter, r *http.Request) {
	name, ok := s.manifestName(w, r)
	if !ok {
		return
	}
	if err := s.cfg.Store.Delete(name); err != nil {
		s.storeError(w, "delete", name, err)
		return
	}
	s.log.Info("manifest deleted", "name", name)
	writeJSON(w, http.StatusOK, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Code:     http.StatusOK,
		Details:  &metav1.StatusDetails{Name: name, Kind: "manifests"},
	})
}

// manifestName returns the request's manifest name once the push source is enabled and
// the name is a DNS-1123 subdomain, which no path can escape from; else it answers.
func (s *Server) manifestName(w http.ResponseWriter, r *http.Request) (string, bool) {
	if s.pushDisabled(w) {
		return "", false
	}
	name := r.PathValue("name")
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		writeBadRequest(w, fmt.Sprintf("manifest name %q is not valid: %s", name, strings.Join(msgs, "; ")))
		return "", false
	}
	return name, true
}

func (s *Server) pushDisabled(w http.ResponseWriter) bool {
	if s.cfg.Store != nil {
		return false
	}
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "push source disabled")
	return true
}

// storeError answers an error of the store: 400 for a name it refuses, 404 for a
// manifest it does not hold, 503 for a push made too early after staticpod started,
// else 500, which is logged.
func (s *Server) storeError(w http.ResponseWriter, op, name string, err error) {
	switch {
	case errors.Is(err, httpsource.ErrInvalidName):
		writeBadRequest(w, err.Error())
	case errors.Is(err, httpsource.ErrNotFound):
		writeNotFound(w, "manifests", name)
	case errors.Is(err, httpsource.ErrStarting):
		w.Header().Set("Retry-After", "1")
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, err.Error())
	default:
		s.log.Error("manifest store", "op", op, "name", name, "err", err)
		writeInternal(w, fmt.Sprintf("%s manifest %q: %v", op, name, err))
	}
}

func invalid(name string, errs []manifests.Problem) *Invalid {
	noun := "errors"
	if len(errs) == 1 {
		noun = "error"
	}
	st := statusOf(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		fmt.Sprintf("manifest %q is invalid (%d %s); nothing was stored", name, len(errs), noun))
	st.Details = &metav1.StatusDetails{Name: name, Kind: "manifests"}
	for _, p := range errs {
		cause := metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Message: p.Message(), Field: p.Field()}
		if p.Err != nil {
			cause.Type = metav1.CauseType(p.Err.Type) // as the apiserver reports field errors
		}
		st.Details.Causes = append(st.Details.Causes, cause)
	}
	return &Invalid{Status: *st, Errors: toProblems(errs)}
}
