package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/staticpod/staticpod/api"
	"github.com/staticpod/staticpod/containerdrt"
	"github.com/staticpod/staticpod/httpsource"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/watcher"
)

// fileSource turns the watcher's snapshots into runner updates, and its failures into
// events on the pods they concern.
func fileSource(r *runner.Runner, srv *api.Server) func(context.Context, watcher.Update) error {
	return func(ctx context.Context, u watcher.Update) error {
		for _, f := range u.Failures {
			srv.ManifestError("file")
			msg := strings.Join(f.Problems, "; ")
			r.Events().Add(runner.Record{Type: runner.EventWarning, Reason: "InvalidManifest", Message: msg, Source: "file"})
			for _, uid := range f.Kept {
				r.Events().Add(runner.Record{UID: uid, Type: runner.EventWarning, Reason: "InvalidManifest",
					Message: "manifest is invalid; the pod keeps running on its last good spec: " + msg, Source: "file"})
			}
		}
		return r.Update(ctx, runner.Update{Source: "file", Pods: u.Pods})
	}
}

// watchExits wakes the runner's PLEG when containerd reports a task exit, so a
// crashed container restarts without waiting for the next relist. Polling stays the
// correctness path: a broken subscription is retried, and never stops staticpod.
func watchExits(ctx context.Context, rt *containerdrt.Runtime, r *runner.Runner, log *slog.Logger) error {
	for ctx.Err() == nil {
		if err := rt.WatchExits(ctx, r.Wake); err != nil {
			log.Debug("task exit events interrupted; relisting still polls", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
	return nil
}

// sourceUpdates hands an HTTP source's snapshots to the runner.
func sourceUpdates(r *runner.Runner, source string) func(context.Context, httpsource.Update) error {
	return func(ctx context.Context, u httpsource.Update) error {
		return r.Update(ctx, runner.Update{Source: source, Pods: u.Pods})
	}
}

// urlSource is the --manifest-url source; its failures become events.
func urlSource(c *cli.Context, url, node string, headers http.Header, r *runner.Runner, srv *api.Server, log *slog.Logger) *httpsource.URLSource {
	return &httpsource.URLSource{
		URL: url, Headers: headers, Period: c.Duration("http-check-frequency"), Node: node,
		CAFile: c.String("manifest-url-ca-file"), Log: log,
		OnError: func(err error) {
			if err == nil {
				r.Events().Add(runner.Record{Type: runner.EventNormal, Reason: "SourceRecovered", Message: "manifest URL answers again", Source: "http"})
				return
			}
			var bad *httpsource.ManifestError
			if errors.As(err, &bad) {
				srv.ManifestError("http")
			}
			r.Events().Add(runner.Record{Type: runner.EventWarning, Reason: "SourceFailed", Message: err.Error() + "; the last good manifests stay in force", Source: "http"})
		},
	}
}
