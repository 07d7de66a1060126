package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpod/staticpod/runner"
)

// clientFlags are the flags of every command that talks to the daemon's API.
func clientFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "api-socket", Value: defaultAPISocket, Usage: "unix socket of the daemon's API", EnvVars: env("api-socket")},
		&cli.StringFlag{Name: "server", Usage: "`http://host:port` of the daemon's TCP API (staticpod run --listen), instead of the socket", EnvVars: env("server")},
		&cli.StringFlag{Name: "token-file", Usage: "file holding the bearer token of the TCP API", EnvVars: env("token-file")},
	}
}

// apiClient reads the daemon's API, over its unix socket or over TCP.
type apiClient struct {
	http   *http.Client
	base   string // URL the paths are appended to
	socket string // the unix socket; "" over TCP
	token  string
}

// newAPIClient returns a client for the API the command's flags name.
func newAPIClient(c *cli.Context) (*apiClient, error) {
	if server := c.String("server"); server != "" {
		u, err := url.Parse(server)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, cli.Exit(fmt.Sprintf("--server %q: use http://host:port", server), exitUsage)
		}
		a := &apiClient{http: &http.Client{}, base: strings.TrimSuffix(server, "/")}
		if f := c.String("token-file"); f != "" {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, cli.Exit(fmt.Sprintf("--token-file: %v", err), exitUsage)
			}
			a.token = strings.TrimSpace(string(data))
		}
		return a, nil
	}
	return unixClient(c.String("api-socket")), nil
}

// unixClient returns a client for the API on the unix socket at path.
func unixClient(path string) *apiClient {
	dialer := &net.Dialer{}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		},
	}
	return &apiClient{http: &http.Client{Transport: transport}, base: "http://staticpod", socket: path}
}

// where names the API the client talks to, for error messages.
func (a *apiClient) where() string {
	if a.socket != "" {
		return "unix socket " + a.socket
	}
	return a.base
}

// get sends GET path?query and returns the response of a 2xx answer. Other answers
// become an *apiError carrying the daemon's message.
func (a *apiClient) get(ctx context.Context, path string, query url.Values) (*http.Response, error) {
	u := a.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", path, err)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, a.dialError(err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readAPIError(resp)
}

// getJSON decodes the JSON answer to GET path into out.
func (a *apiClient) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	resp, err := a.get(ctx, path, query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// pods lists every pod the daemon runs, with its status.
func (a *apiClient) pods(ctx context.Context) (*corev1.PodList, error) {
	var list corev1.PodList
	if err := a.getJSON(ctx, "/pods", nil, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

// pod returns one pod; a pod the daemon does not run is a *notFoundError that suggests
// the names that come close.
func (a *apiClient) pod(ctx context.Context, ref podRef) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := a.getJSON(ctx, "/pods/"+url.PathEscape(ref.Namespace)+"/"+url.PathEscape(ref.Name), nil, &pod)
	var apiErr *apiError
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
		nf := &notFoundError{ref: ref}
		if list, err := a.pods(ctx); err == nil {
			nf.total, nf.near = len(list.Items), nearNames(ref, list.Items)
		}
		return nil, nf
	}
	if err != nil {
		return nil, err
	}
	return &pod, nil
}

// events returns a pod's events, oldest first.
func (a *apiClient) events(ctx context.Context, ref podRef) ([]runner.Record, error) {
	var records []runner.Record
	if err := a.getJSON(ctx, "/events", url.Values{"pod": {ref.String()}}, &records); err != nil {
		return nil, err
	}
	return records, nil
}

// dialError explains a request that reached no daemon: the socket is missing, nobody
// listens on it, or the user may not open it.
func (a *apiClient) dialError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	start := "start it with `staticpod run` (or `systemctl start staticpod`)"
	switch {
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		return &unreachableError{fmt.Sprintf("permission denied on the %s: the API socket is open to its owner only (mode 0600); run this command as root, e.g. with sudo", a.where())}
	case a.socket != "" && errors.Is(err, syscall.ENOENT):
		return &unreachableError{fmt.Sprintf("the staticpod daemon is not running: no API socket at %s; %s, or give its socket with --api-socket (or STATICPOD_API_SOCKET)", a.socket, start)}
	case a.socket != "" && errors.Is(err, syscall.ECONNREFUSED):
		return &unreachableError{fmt.Sprintf("the staticpod daemon is not running: nothing listens on the %s (left behind by a daemon that exited?); %s", a.where(), start)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &unreachableError{fmt.Sprintf("the staticpod daemon does not answer at %s: connection refused; is `staticpod run --listen` running there?", a.base)}
	}
	return &unreachableError{fmt.Sprintf("cannot reach the staticpod daemon at the %s: %v", a.where(), err)}
}

// readAPIError turns a non-2xx answer into an *apiError, with the message of the
// metav1.Status the daemon sends, or the text of the body.
func readAPIError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &apiError{Code: resp.StatusCode, Message: strings.TrimSpace(string(body))}
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		e.Message = st.Message
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Message += " (give the API token with --token-file)"
	}
	return e
}

// unreachableError is a command that reached no daemon. It exits 2: the command
// cannot run here as things are.
type unreachableError struct{ msg string }

func (e *unreachableError) Error() string { return e.msg }

// apiError is an answer of the daemon other than 2xx.
type apiError struct {
	Code    int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Code) }

// notFoundError is a pod the daemon does not run.
type notFoundError struct {
	ref   podRef
	near  []string
	total int // pods the daemon runs
}

func (e *notFoundError) Error() string {
	msg := fmt.Sprintf("pod %q not found", e.ref.String())
	switch {
	case len(e.near) == 1:
		return msg + "; did you mean " + e.near[0] + "?"
	case len(e.near) > 1:
		return msg + "; did you mean one of " + strings.Join(e.near, ", ") + "?"
	case e.total == 0:
		return msg + ": staticpod runs no pods"
	}
	return msg + " (see staticpod ps)"
}

// exitError gives an error of a client command its exit code: 2 when no daemon could
// be reached (or the command line is wrong), 1 otherwise.
func exitError(cmd string, err error) error {
	var exit cli.ExitCoder
	var unreachable *unreachableError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		return err
	case errors.As(err, &unreachable):
		return cli.Exit(err.Error(), exitUsage)
	}
	return cli.Exit(fmt.Sprintf("%s: %v", cmd, err), exitInvalid)
}

// podRef names a pod as the commands take it: namespace/name, or the name alone in
// the default namespace.
type podRef struct{ Namespace, Name string }

func parsePodRef(arg string) (podRef, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		ns, name = metav1.NamespaceDefault, arg
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return podRef{}, cli.Exit(fmt.Sprintf("%q is not a pod: give its name (web-node1) or namespace/name (kube-system/etcd-node1)", arg), exitUsage)
	}
	return podRef{ns, name}, nil
}

func (r podRef) String() string { return r.Namespace + "/" + r.Name }

// displayName is how a pod is shown, and typed back: its name in the default namespace,
// namespace/name elsewhere.
func displayName(namespace, name string) string {
	if namespace == metav1.NamespaceDefault || namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// maxSuggestions bounds the near names a not-found error lists.
const maxSuggestions = 3

// nearNames returns the pods whose name comes close to ref's, closest first: the same
// name in another namespace, names that start with it (a static name without its node
// suffix: web for web-node1), and names within a few typos.
func nearNames(ref podRef, pods []corev1.Pod) []string {
	type candidate struct {
		name string
		dist int
	}
	var found []candidate
	for _, p := range pods {
		d := levenshtein(ref.Name, p.Name)
		switch {
		case strings.HasPrefix(p.Name, ref.Name+"-") || strings.HasPrefix(ref.Name, p.Name+"-"):
			d = min(d, 1)
		case d > max(2, len(ref.Name)/4):
			continue
		}
		if p.Namespace != ref.Namespace {
			d++
		}
		found = append(found, candidate{displayName(p.Namespace, p.Name), d})
	}
	slices.SortStableFunc(found, func(a, b candidate) int { return a.dist - b.dist })
	var out []string
	for _, c := range found[:min(len(found), maxSuggestions)] {
		out = append(out, c.name)
	}
	return out
}

// levenshtein is the edit distance between a and b, in bytes.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// splitArgs returns the command's arguments and what follows "--", after applying the
// flags found among the arguments: urfave/cli stops at the first argument, and kubectl
// users type `logs web-node1 -f`. One-letter bool flags may be joined (-it).
func splitArgs(c *cli.Context) (args, rest []string, err error) {
	in := c.Args().Slice()
	for i := 0; i < len(in); i++ {
		a := in[i]
		if a == "--" {
			return args, in[i+1:], nil
		}
		if len(a) < 2 || a[0] != '-' {
			args = append(args, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := lookupFlag(c.Command.Flags, name)
		if f == nil && !hasValue && !strings.HasPrefix(a, "--") && setShortBools(c, name) {
			continue
		}
		if f == nil {
			return nil, nil, cli.Exit(fmt.Sprintf("flag provided but not defined: %s (see 'staticpod %s --help')", a, c.Command.Name), exitUsage)
		}
		if _, isBool := f.(*cli.BoolFlag); isBool && !hasValue {
			value = "true"
		} else if !hasValue {
			if i+1 == len(in) {
				return nil, nil, cli.Exit(fmt.Sprintf("flag needs an argument: %s", a), exitUsage)
			}
			i++
			value = in[i]
		}
		if err := setFlag(c, f, value); err != nil {
			return nil, nil, err
		}
	}
	return args, nil, nil
}

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// setShortBools sets each letter of -it as a bool flag, if every letter is one.
func setShortBools(c *cli.Context, letters string) bool {
	var fs []cli.Flag
	for _, l := range letters {
		f := lookupFlag(c.Command.Flags, string(l))
		if _, isBool := f.(*cli.BoolFlag); !isBool {
			return false
		}
		fs = append(fs, f)
	}
	for _, f := range fs {
		if setFlag(c, f, "true") != nil {
			return false
		}
	}
	return len(fs) > 0
}

// setFlag sets a flag under each of its names: urfave/cli keeps one value per alias.
func setFlag(c *cli.Context, f cli.Flag, value string) error {
	for _, n := range f.Names() {
		if err := c.Set(n, value); err != nil {
			return cli.Exit(fmt.Sprintf("invalid value %q for flag -%s: %v", value, n, err), exitUsage)
		}
	}
	return nil
}

// podRequest is a client command's one POD argument, found through the API, with the
// context (cancelled by SIGINT and SIGTERM) its requests run under.
type podRequest struct {
	ctx    context.Context
	stop   context.CancelFunc
	client *apiClient
	ref    podRef
	pod    *corev1.Pod
}

// lookupPod parses a command's one POD argument and fetches the pod; the caller must
// call stop.
func lookupPod(c *cli.Context, command string) (*podRequest, error) {
	args, rest, err := splitArgs(c)
	if err != nil {
		return nil, err
	}
	if len(args) != 1 || len(rest) > 0 {
		return nil, cli.Exit(fmt.Sprintf("%s takes one POD (see 'staticpod %s --help')", command, command), exitUsage)
	}
	ref, err := parsePodRef(args[0])
	if err != nil {
		return nil, err
	}
	client, err := newAPIClient(c)
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	pod, err := client.pod(ctx, ref)
	if err != nil {
		stop()
		return nil, exitError(command, err)
	}
	return &podRequest{ctx: ctx, stop: stop, client: client, ref: ref, pod: pod}, nil
}
