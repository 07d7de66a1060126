package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/staticpod/staticpod/runner/events"
)

// events answers the runner's events, oldest first (by their last occurrence), as a JSON
// array; with follow=1, as newline-delimited JSON: the current ones, then each new or
// repeated one as it happens, until the client leaves. pod=namespace/name keeps only
// that pod's.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	follow, err := boolParam(q, "follow")
	if err != nil {
		writeBadRequest(w, err.Error())
		return
	}
	pod := q.Get("pod")
	if pod != "" && !strings.Contains(pod, "/") {
		writeBadRequest(w, fmt.Sprintf("pod=%q: name the pod as namespace/name", pod))
		return
	}
	match := func(rec events.Record) bool { return pod == "" || rec.Pod == pod }
	store := s.cfg.Backend.Events()
	if !follow {
		writeJSON(w, http.StatusOK, filterEvents(store.All(), match))
		return
	}
	// Subscribe before reading the current events, so that none falls between the two;
	// one may then come twice, as a repeat does anyway.
	updates, unsubscribe := store.Subscribe()
	defer unsubscribe()
	ctx, cancel := s.stream(w, r)
	defer cancel()

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fw := newFlushWriter(w)
	enc := json.NewEncoder(w) // one record per line
	for _, rec := range filterEvents(store.All(), match) {
		if enc.Encode(rec) != nil {
			return
		}
	}
	if fw.Flush() != nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case rec := <-updates:
			if !match(rec) {
				continue
			}
			if enc.Encode(rec) != nil || fw.Flush() != nil {
				return // the client is gone
			}
		}
	}
}

// filterEvents returns the matching records ordered by when they last happened, oldest
// first; never nil, so that none is the JSON array [].
func filterEvents(all []events.Record, match func(events.Record) bool) []events.Record {
	out := make([]events.Record, 0, len(all))
	for _, rec := range all {
		if match(rec) {
			out = append(out, rec)
		}
	}
	slices.SortStableFunc(out, func(a, b events.Record) int {
		if c := a.Last.Compare(b.Last); c != 0 {
			return c
		}
		return a.First.Compare(b.First)
	})
	return out
}
