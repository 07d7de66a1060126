package api

import (
	"net/http"

	"github.com/staticpod/staticpod/runner"
)

// Objects lists the ConfigMaps and Secrets the sources provide, by name and keys;
// *runner.Runner implements it. A Secret's values never leave the runner this way.
type Objects interface {
	ConfigMaps() []runner.Object
	Secrets() []runner.Object
}

var _ Objects = (*runner.Runner)(nil)

// listConfigMaps answers GET /configmaps: every ConfigMap loaded, with its source and
// keys, sorted by source, namespace and name.
func (s *Server) listConfigMaps(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Objects == nil {
		writeNotFoundMsg(w, "configmaps", "", "object listing is not enabled on this server")
		return
	}
	writeJSON(w, http.StatusOK, s.cfg.Objects.ConfigMaps())
}

// listSecrets answers GET /secrets: every Secret loaded, with its source, type and
// keys, never its values.
func (s *Server) listSecrets(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Objects == nil {
		writeNotFoundMsg(w, "secrets", "", "object listing is not enabled on this server")
		return
	}
	writeJSON(w, http.StatusOK, s.cfg.Objects.Secrets())
}
