package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/staticpod/staticpod/runner"
)

// imagesTimeout bounds listing the runtime's images.
const imagesTimeout = 30 * time.Second

// listImages answers GET /images: the runtime's images, each with its names, size, when
// it came, whether a known pod uses it and when one last did, and whether the image dir
// pins it; sorted by first name.
func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Images == nil {
		writeNotFoundMsg(w, "images", "", "image listing is not enabled on this server")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), imagesTimeout)
	defer cancel()
	images, err := s.cfg.Images.Images(ctx)
	if err != nil {
		s.log.Warn("list images", "err", err)
		writeInternal(w, err.Error())
		return
	}
	slices.SortFunc(images, func(a, b runner.ImageUse) int {
		return strings.Compare(strings.Join(a.Names, ","), strings.Join(b.Names, ","))
	})
	writeJSON(w, http.StatusOK, images)
}
