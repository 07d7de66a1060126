package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/staticpod/staticpod/runner/events"
)

// addEvents records events of two pods and one of a source, in that order.
func addEvents(b *fakeBackend) {
	b.events.Add(events.Record{UID: "uid-web", Pod: "default/web-node1", Container: "nginx", Type: events.Normal, Reason: "Started", Message: "started"})
	b.events.Add(events.Record{Type: events.Warning, Reason: "InvalidManifest", Message: "bad.yaml: spec: Required value", Source: "file"})
	b.events.Add(events.Record{UID: "uid-db", Pod: "default/db-node1", Container: "db", Type: events.Warning, Reason: "BackOff", Message: "back-off"})
	b.events.Add(events.Record{UID: "uid-web", Pod: "default/web-node1", Container: "nginx", Type: events.Normal, Reason: "Killing", Message: "stopping"})
}

func reasons(recs []events.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Reason)
	}
	return out
}

func TestEventsOldestFirstAndByPod(t *testing.T) {
	b := newFakeBackend()
	s := mustNew(t, testConfig(b, nil))
	rec := serve(t, s.Handler(), http.MethodGet, "/events", nil)
	if rec.Code != http.StatusOK || rec.Body.String() != "[]\n" {
		t.Errorf("GET /events of none = %d %q, want []", rec.Code, rec.Body)
	}
	addEvents(b)
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"Started", "InvalidManifest", "BackOff", "Killing"}},
		{"?pod=default/web-node1", []string{"Started", "Killing"}},
		{"?pod=default/nope", nil},
	}
	for _, tt := range tests {
		rec := serve(t, s.Handler(), http.MethodGet, "/events"+tt.query, nil)
		var got []events.Record
		decodeJSON(t, rec.Body.Bytes(), &got)
		if diff := cmp.Diff(tt.want, reasons(got)); diff != "" {
			t.Errorf("GET /events%s reasons (-want +got):\n%s", tt.query, diff)
		}
	}
	rec = serve(t, s.Handler(), http.MethodGet, "/events?pod=web-node1", nil)
	wantStatus(t, rec, http.StatusBadRequest, "BadRequest")
}

func TestEventsFollowStreamsCurrentThenNew(t *testing.T) {
	b := newFakeBackend()
	addEvents(b)
	s := mustNew(t, testConfig(b, nil))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events?follow=1&pod=default/web-node1", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type = %q, want application/x-ndjson", ct)
	}
	lines := readLines(resp.Body)
	awaitEvent(t, lines, "Started", 1)
	awaitEvent(t, lines, "Killing", 1)

	b.events.Add(events.Record{UID: "uid-db", Pod: "default/db-node1", Type: events.Normal, Reason: "Other"})
	b.events.Add(events.Record{UID: "uid-web", Pod: "default/web-node1", Container: "nginx", Type: events.Normal, Reason: "Pulled", Message: "pulled"})
	awaitEvent(t, lines, "Pulled", 1)
	b.events.Add(events.Record{UID: "uid-web", Pod: "default/web-node1", Container: "nginx", Type: events.Normal, Reason: "Pulled", Message: "pulled"})
	awaitEvent(t, lines, "Pulled", 2)
}

// awaitEvent waits for the next event of the stream and checks its reason and count.
func awaitEvent(t *testing.T, lines <-chan string, reason string, count int) {
	t.Helper()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("the stream ended; want the event %s", reason)
		}
		var rec events.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("event line %q: %v", line, err)
		}
		if rec.Reason != reason || rec.Count != count {
			t.Fatalf("next event = %s x%d, want %s x%d", rec.Reason, rec.Count, reason, count)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no event %s within 10s", reason)
	}
}
