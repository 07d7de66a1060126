package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/api/client"
)

const (
	// defaultWaitTimeout is kubectl wait's default --timeout.
	defaultWaitTimeout = 30 * time.Second
	// foreverTimeout is what a negative --timeout stands for, as in kubectl wait.
	foreverTimeout = 168 * time.Hour
	// errWaitTimeout is kubectl's message for a wait that ran out of time.
	errWaitTimeout = "timed out waiting for the condition"
)

// waitPeriod is how often wait lists the pods again; a variable for the tests.
var waitPeriod = 500 * time.Millisecond

// Wait is the wait command: block until pods meet a condition or are gone, as kubectl
// wait does, for scripts and health checks.
func Wait() *cli.Command {
	return &cli.Command{
		Name:         "wait",
		BashComplete: completePods(true),
		Usage:        "wait until pods meet a condition (Ready) or are gone",
		ArgsUsage:    "POD... | --all",
		Description: "As kubectl wait: --for=condition=Ready waits until each POD's Ready condition is True\n" +
			"(condition=Ready=false until it is False), --for=delete until each POD is gone. It prints\n" +
			"\"pod/NAME condition met\" for each as it gets there and exits 0 once all have; after --timeout\n" +
			"it names those that have not (\"timed out waiting for the condition on pods/NAME\") and\n" +
			"exits 1. A POD the daemon does not run is an error at once for a condition, and met for\n" +
			"delete. --all takes every pod the daemon runs. Before it looks at the pods, wait waits\n" +
			"(within --timeout) for the daemon to answer and to list every pod its sources want, so\n" +
			"that it can run at boot beside staticpod itself. POD is as ps prints it: name or\n" +
			"namespace/name.",
		Flags: append(clientFlags(),
			&cli.StringFlag{Name: "for", Usage: "what to wait for: `condition=NAME[=VALUE]` (VALUE True unless given; compared ignoring case) or delete"},
			&cli.BoolFlag{Name: "all", Usage: "every pod the daemon runs, instead of the PODs named"},
			&cli.DurationFlag{Name: "timeout", Value: defaultWaitTimeout, Usage: "how long to wait: 0 checks once, a negative value waits a week"},
		),
		Action: runWait,
	}
}

// waitFor is a parsed --for: a condition's type and wanted status, or deletion.
type waitFor struct {
	deleted         bool
	condType, value string // condition=Type[=value]
}

// parseFor parses --for as kubectl does: "delete", or "condition=Type[=Status]" with
// True for an absent status.
func parseFor(s string) (waitFor, error) {
	if strings.EqualFold(s, "delete") {
		return waitFor{deleted: true}, nil
	}
	cond, ok := strings.CutPrefix(s, "condition=")
	if !ok || cond == "" {
		return waitFor{}, cli.Exit(fmt.Sprintf("--for %q: use --for=condition=Ready, --for=condition=Ready=false or --for=delete", s), ExitUsage)
	}
	typ, value, ok := strings.Cut(cond, "=")
	if !ok {
		value = string(corev1.ConditionTrue)
	}
	return waitFor{condType: typ, value: value}, nil
}

// met reports whether pod (nil: the daemon does not run it) is where w waits for it to be.
func (w waitFor) met(pod *corev1.Pod) bool {
	if w.deleted || pod == nil {
		return w.deleted && pod == nil
	}
	for _, c := range pod.Status.Conditions {
		if strings.EqualFold(string(c.Type), w.condType) {
			return strings.EqualFold(string(c.Status), w.value)
		}
	}
	return false
}

func runWait(c *cli.Context) error {
	args, rest, err := splitArgs(c)
	if err != nil {
		return err
	}
	all := c.Bool("all")
	switch {
	case len(rest) > 0:
		return cli.Exit("wait takes no command after -- (see 'staticpod wait --help')", ExitUsage)
	case all && len(args) > 0:
		return cli.Exit("wait takes PODs or --all, not both (see 'staticpod wait --help')", ExitUsage)
	case !all && len(args) == 0:
		return cli.Exit("wait needs a POD, or --all (see 'staticpod wait --help')", ExitUsage)
	case c.String("for") == "":
		return cli.Exit("wait needs --for=condition=Ready or --for=delete (see 'staticpod wait --help')", ExitUsage)
	}
	w, err := parseFor(c.String("for"))
	if err != nil {
		return err
	}
	var refs []podRef
	for _, a := range args {
		ref, err := parsePodRef(a)
		if err != nil {
			return err
		}
		refs = append(refs, ref)
	}
	api, err := newClient(c)
	if err != nil {
		return err
	}
	timeout := c.Duration("timeout")
	if timeout < 0 {
		timeout = foreverTimeout
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if timeout > 0 { // 0 looks once, without a deadline on its requests
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	wt := &waiter{api: api, cond: w, out: c.App.Writer, once: timeout == 0}
	return exitError("wait", wt.run(ctx, refs))
}

// waiter waits, by listing the pods every waitPeriod, until each of its pods meets its
// condition or ctx is done.
type waiter struct {
	api  *client.Client
	cond waitFor
	out  io.Writer // where "pod/NAME condition met" goes
	once bool      // --timeout 0: look once, do not wait
}

// run waits for the daemon to list every wanted pod, takes the pods (refs, or every pod
// when refs is empty), then waits for them.
func (wt *waiter) run(ctx context.Context, refs []podRef) error {
	list, err := wt.firstList(ctx)
	if err != nil {
		return err
	}
	if len(refs) == 0 {
		for _, p := range list.Items {
			refs = append(refs, podRef{p.Namespace, p.Name})
		}
		if len(refs) == 0 && !wt.cond.deleted {
			return errors.New("no matching resources found: staticpod runs no pods")
		}
	}
	var pending []podRef
	for _, ref := range refs {
		switch {
		case findPod(list, ref) != nil:
			pending = append(pending, ref)
		case !wt.cond.deleted:
			return &notFoundError{NotFoundError: &client.NotFoundError{Namespace: ref.Namespace, Name: ref.Name},
				near: nearNames(ref, list.Items), total: len(list.Items)}
		} // gone already: kubectl's --for=delete passes it over without a word
	}
	if len(pending) == 0 {
		return nil
	}
	tick := time.NewTicker(waitPeriod)
	defer tick.Stop()
	var pollErr error // the last poll's error; later polls retry it
	for {
		if list != nil {
			if pending, err = wt.check(list, pending); err != nil || len(pending) == 0 {
				return err
			}
		}
		if wt.once {
			return unmet(pending, "condition not met for", nil)
		}
		select {
		case <-ctx.Done():
			return unmet(pending, errWaitTimeout+" on", pollErr)
		case <-tick.C:
		}
		l, err := wt.api.Pods(ctx)
		switch {
		case ctx.Err() != nil: // the deadline, during the request: the select says so
			list = nil
		case err != nil:
			list, pollErr = nil, err
		default:
			list, pollErr = l, nil
		}
	}
}

// firstList lists the pods once the daemon answers and lists every pod its sources want,
// trying again every waitPeriod until then: at boot, wait may start before the daemon has
// opened its socket, read its manifests or synced each pod once, and the pods it names
// are not missing.
func (wt *waiter) firstList(ctx context.Context) (*corev1.PodList, error) {
	tick := time.NewTicker(waitPeriod)
	defer tick.Stop()
	var last error // the last answer that was not the end of ctx
	for {
		err := wt.api.PodsListed(ctx)
		var list *corev1.PodList
		if err == nil {
			if list, err = wt.api.Pods(ctx); err == nil {
				return list, nil
			}
		}
		var unreachable *client.UnreachableError
		var apiErr *client.APIError
		var untrusted *tls.CertificateVerificationError
		switch {
		case ctx.Err() != nil:
		case errors.As(err, &untrusted): // no retry will trust it
			return nil, err
		case errors.As(err, &unreachable) || errors.As(err, &apiErr) && apiErr.Code == http.StatusServiceUnavailable:
			last = err
		default:
			return nil, err
		}
		if last == nil {
			last = err
		}
		if wt.once {
			return nil, last
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", errWaitTimeout, last)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", errWaitTimeout, last)
		case <-tick.C:
		}
	}
}

// check prints the pods of pending that are where they should be, and returns the others.
// A pod that went away during a condition wait is an error: it cannot meet it.
func (wt *waiter) check(list *corev1.PodList, pending []podRef) ([]podRef, error) {
	var left []podRef
	for _, ref := range pending {
		pod := findPod(list, ref)
		switch {
		case wt.cond.met(pod):
			fmt.Fprintf(wt.out, "pod/%s condition met\n", DisplayName(ref.Namespace, ref.Name))
		case pod == nil:
			return nil, &client.NotFoundError{Namespace: ref.Namespace, Name: ref.Name}
		default:
			left = append(left, ref)
		}
	}
	return left, nil
}

// unmet is the error of a wait that ended with pods pending: one line per pod, as kubectl
// prints them ("timed out waiting for the condition on pods/NAME"), and the last error
// of the daemon, if the polls failed.
func unmet(pending []podRef, what string, last error) error {
	var lines []string
	for _, ref := range pending {
		lines = append(lines, fmt.Sprintf("%s pods/%s", what, DisplayName(ref.Namespace, ref.Name)))
	}
	if last != nil {
		lines = append(lines, fmt.Sprintf("(the last list of the pods failed: %v)", explain(last)))
	}
	return errors.New(strings.Join(lines, "\nwait: "))
}

// findPod returns the pod of list ref names, or nil.
func findPod(list *corev1.PodList, ref podRef) *corev1.Pod {
	for i := range list.Items {
		if p := &list.Items[i]; p.Namespace == ref.Namespace && p.Name == ref.Name {
			return p
		}
	}
	return nil
}
