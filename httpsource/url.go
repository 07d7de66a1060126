package httpsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
)

// URLSource is the kubelet's --manifest-url: it polls one URL and sends the pods of its
// body whenever they change. A poll that fails in any way keeps the last good snapshot
// in force: what is sent then is an Unchanged update with the failure, so nothing
// running is touched. The failure is sent, and logged, when the source starts failing
// or fails differently, and its end when it recovers.
type URLSource struct {
	URL      string
	Headers  http.Header   // sent with every request; values are never logged
	Period   time.Duration // DefaultPeriod when 0
	Node     string        // node name, for static pod names
	CAFile   string        // extra PEM roots for https, besides the system's
	MaxBytes int64         // manifests.MaxManifestBytes when 0
	Timeout  time.Duration // per request, body included; DefaultTimeout when 0
	Log      *slog.Logger

	afterPoll func() // tests: called when a poll has been fully handled
}

// ManifestError is a body that was fetched but holds manifest errors. Any error makes
// the whole body unusable: the last good snapshot stays in force.
type ManifestError struct {
	Problems []manifests.Problem // each located by URL, document and field path
}

func (e *ManifestError) Error() string {
	return "invalid manifest: " + strings.Join(e.problems(), "; ")
}

func (e *ManifestError) problems() []string {
	return manifests.Messages(e.Problems)
}

// poller is the state of one Run: owned by its goroutine, no lock needed.
type poller struct {
	src     *URLSource
	client  *http.Client
	log     *slog.Logger
	where   string     // the URL without credentials or query values: for logs and pods' location
	key     string     // what the pods' UIDs hash: see identityURL
	good    []byte     // the last body accepted; nil before the first
	sent    bool       // a snapshot has been sent
	pods    string     // fingerprint of the pods last sent
	valid   validators // of good, so that a 304 means "still good"
	failing string     // the error last reported, "" while the source is fine
}

// Run polls the URL at once and then every Period until ctx is done, sending each new
// snapshot to emit. An empty body or an empty list is a snapshot with no pods, and is
// sent. It returns nil when ctx is done, and an error only for a configuration that can
// never work (an unusable URL or CA file) or when emit fails while ctx is live.
func (s *URLSource) Run(ctx context.Context, emit func(context.Context, manifests.Update) error) error {
	p, err := s.newPoller()
	if err != nil {
		return err
	}
	defer p.client.CloseIdleConnections()
	ticker := time.NewTicker(s.period())
	defer ticker.Stop()
	for {
		if err := p.poll(ctx, emit); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("send snapshot of %s: %w", p.where, err)
		}
		if s.afterPoll != nil {
			s.afterPoll()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (s *URLSource) newPoller() (*poller, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return nil, fmt.Errorf("manifest URL: %w", cleanError(err))
	}
	where := publicURL(u, s.URL)
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("manifest URL %s: want an http or https URL", where)
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	client, err := newClient(s.CAFile, timeout)
	if err != nil {
		return nil, fmt.Errorf("manifest URL %s: %w", where, err)
	}
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("source", manifests.SourceHTTP, "url", where)
	if u.Scheme == "http" {
		log.Warn("the manifest URL is plain http: anyone on the network path can change the pods it runs; use https (--manifest-url-ca-file for a private CA)")
	}
	return &poller{src: s, client: client, log: log, where: where, key: identityURL(u, s.URL)}, nil
}

func (s *URLSource) period() time.Duration {
	if s.Period <= 0 {
		return DefaultPeriod
	}
	return s.Period
}

func (s *URLSource) maxBytes() int64 {
	if s.MaxBytes <= 0 {
		return manifests.MaxManifestBytes
	}
	return s.MaxBytes
}

// poll fetches the URL once and sends a snapshot when its body is new and valid. Every
// failure is reported and swallowed; only emit's error is returned.
func (p *poller) poll(ctx context.Context, emit func(context.Context, manifests.Update) error) error {
	resp, err := fetch(ctx, p.client, p.src.URL, p.src.Headers, p.valid, p.src.maxBytes())
	if err != nil {
		if ctx.Err() != nil {
			return nil // shutting down: not a failure of the source
		}
		return p.report(ctx, emit, err)
	}
	switch {
	case resp.NotModified && p.sent:
		p.log.Debug("manifest URL unchanged (304)")
		return p.report(ctx, emit, nil)
	case resp.NotModified:
		// Only a conditional request may be answered 304, and none is made before the
		// first good body: the server is wrong, so this poll is a failure.
		return p.report(ctx, emit, errors.New("server answered 304 Not Modified to an unconditional request"))
	case p.sent && bytes.Equal(resp.Body, p.good):
		p.log.Debug("manifest URL unchanged")
		p.valid = validators{ETag: resp.ETag, LastModified: resp.LastModified}
		return p.report(ctx, emit, nil)
	}
	res := manifests.Load(resp.Body, manifests.Options{
		NodeName: p.src.Node,
		Source:   manifests.Source{Kind: manifests.SourceHTTP, Location: p.where, Key: p.key},
	})
	objs := res.Objects()
	res.CheckReferences(objs) // the body is the whole source: its pods read its objects
	if len(res.Errors) > 0 {
		return p.report(ctx, emit, &ManifestError{Problems: res.Errors})
	}
	fp := fingerprint(res.Pods) + objs.Fingerprint()
	if p.sent && fp != "" && fp == p.pods {
		p.accepted(resp, res, fp)
		return p.report(ctx, emit, nil) // only comments or layout changed
	}
	// A snapshot carries no failure: it ends any failure the runner knows of.
	if err := emit(ctx, manifests.Update{Source: manifests.SourceHTTP, Pods: res.Pods, Objects: objs}); err != nil {
		return err
	}
	p.log.Info("manifest URL changed", "pods", len(res.Pods))
	p.accepted(resp, res, fp)
	p.recovered()
	return nil
}

// accepted records a body as the new last good one, its pods as sent.
func (p *poller) accepted(resp response, res manifests.Result, fp string) {
	p.good, p.sent, p.pods = resp.Body, true, fp
	p.valid = validators{ETag: resp.ETag, LastModified: resp.LastModified}
	for _, w := range res.Warnings {
		p.log.Warn("manifest warning", "err", w.Error())
	}
}

// fingerprint identifies a list of pods by their content (manifests.Fingerprint), so
// that a body that changed only in comments or layout is not sent again. (Not by UIDs
// alone: a manifest may set metadata.uid, and then its UID stays while its spec
// changes.)
func fingerprint(pods []*corev1.Pod) string {
	parts := []string{"pods"}
	for _, p := range pods {
		parts = append(parts, manifests.Fingerprint(p))
	}
	return strings.Join(parts, " ")
}

// report tells of the source's state when it changes (ok -> failing, failing
// differently, failing -> ok): it logs, and sends an Unchanged update with the failure,
// or without one on recovery. A poll that fails as the last one did is silent. Only
// emit's error is returned.
func (p *poller) report(ctx context.Context, emit func(context.Context, manifests.Update) error, err error) error {
	if err == nil {
		if p.failing == "" {
			return nil
		}
		p.recovered()
		return emit(ctx, manifests.Update{Source: manifests.SourceHTTP, Unchanged: true})
	}
	if err.Error() == p.failing {
		return nil
	}
	p.failing = err.Error()
	p.log.Warn("manifest URL failing; its pods keep their last good snapshot", "err", p.failing)
	f := manifests.Failure{Location: p.where, Problems: []string{p.failing}}
	var bad *ManifestError
	if errors.As(err, &bad) {
		f.Problems, f.Invalid = bad.problems(), true
	}
	return emit(ctx, manifests.Update{Source: manifests.SourceHTTP, Unchanged: true, Failures: []manifests.Failure{f}})
}

// recovered notes the end of a failure, if there was one.
func (p *poller) recovered() {
	if p.failing != "" {
		p.failing = ""
		p.log.Info("manifest URL answers again")
	}
}
