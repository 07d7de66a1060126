package main

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpod/staticpod/api"
	"github.com/staticpod/staticpod/internal/diskspace"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/revisions"
)

// The documents whose commands, flags and metrics are checked against the code.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, files...)
}

// codeLine is a piece of code a document shows: an inline code span, or a line of a
// fenced block.
type codeLine struct {
	file   string
	line   int
	text   string
	inline bool // a code span, checked as a command only when it begins with one
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// codeOf returns the inline code spans of file and the commands of its fenced blocks:
// every line of a sh block but comments, the lines after a `$ ` prompt in any other.
func codeOf(t *testing.T, file string) []codeLine {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []codeLine
	fenced, shell := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if lang, ok := strings.CutPrefix(strings.TrimSpace(text), "```"); ok {
			fenced, shell = !fenced, lang == "sh" || lang == "bash"
			continue
		}
		switch {
		case fenced && shell && !strings.HasPrefix(text, "#"):
			out = append(out, codeLine{file, n, uncomment(text), false})
		case fenced:
			if cmd, ok := strings.CutPrefix(text, "$ "); ok {
				out = append(out, codeLine{file, n, uncomment(cmd), false})
			}
		default:
			for _, m := range inlineCode.FindAllStringSubmatch(text, -1) {
				out = append(out, codeLine{file, n, m[1], true})
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// uncomment cuts a shell comment off a line.
func uncomment(line string) string {
	before, _, _ := strings.Cut(line, " #")
	return before
}

// flagNames returns every name and alias of flags.
func flagNames(flags []cli.Flag) map[string]bool {
	names := map[string]bool{"help": true, "h": true}
	for _, f := range flags {
		for _, n := range f.Names() {
			names[n] = true
		}
	}
	return names
}

// foreignFlags are other programs' flags the documents show in code of their own
// (`--unix-socket` of curl's, and so on): a code span holding only a flag is checked
// against staticpod's flags unless it is one of these.
var foreignFlags = map[string]bool{
	"root": true, // containerd's
}

// shellEnd are the words that end one command in a line of shell.
var shellEnd = map[string]bool{"|": true, "||": true, ";": true, "&&": true, ">": true, "2>": true, "<": true, "#": true, "--": true}

// TestDocsNameOnlyCommandsAndFlagsThatExist checks every `staticpod <command>` shown
// in README.md and docs/*.md, and each flag after it, against the CLI's own
// definitions (the app main runs), and each flag shown on its own against the flags
// of every command.
func TestDocsNameOnlyCommandsAndFlagsThatExist(t *testing.T) {
	app := newApp()
	commands := map[string]map[string]bool{}
	anyFlag := flagNames(app.Flags)
	if app.EnableBashCompletion {
		for _, n := range cli.BashCompletionFlag.Names() {
			anyFlag[n] = true
		}
	}
	for _, c := range app.Commands {
		commands[c.Name] = flagNames(c.Flags)
		for n := range commands[c.Name] {
			anyFlag[n] = true
		}
	}
	loneFlag := regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*)(=.*)?$`)
	for _, file := range docFiles(t) {
		for _, code := range codeOf(t, file) {
			at := func() string { return file + ":" + strconv.Itoa(code.line) }
			if m := loneFlag.FindStringSubmatch(code.text); m != nil {
				if !anyFlag[m[1]] && !foreignFlags[m[1]] {
					t.Errorf("%s: --%s is no flag of any staticpod command", at(), m[1])
				}
				continue
			}
			words := strings.Fields(code.text)
			for i := 0; i < len(words)-1; i++ {
				if words[i] != "staticpod" && !strings.HasSuffix(words[i], "/staticpod") {
					continue
				}
				if i > 0 && strings.HasPrefix(words[i-1], "-") {
					continue // a value: ctr -n staticpod
				}
				if code.inline && strings.HasPrefix(code.text, "staticpod is starting") {
					continue // the API's 503 message, not a command
				}
				if code.inline && slices.ContainsFunc(words[:i], func(w string) bool { return !strings.Contains(w, "=") }) {
					continue // a span of prose or output: `staticpod is starting`
				}
				cmd := words[i+1]
				if !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(cmd) {
					continue
				}
				flags, ok := commands[cmd]
				if !ok {
					t.Errorf("%s: `staticpod %s`: staticpod has no command %q", at(), cmd, cmd)
					continue
				}
				for _, w := range words[i+2:] {
					if shellEnd[w] || strings.HasPrefix(w, "#") {
						break
					}
					if !strings.HasPrefix(w, "-") || w == "-" || strings.HasPrefix(w, "-[") {
						continue
					}
					name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
					name = strings.TrimRight(name, ".,:;)`")
					if name == "" || strings.ContainsAny(name, "<>[]…") {
						continue
					}
					names := []string{name}
					if !strings.HasPrefix(w, "--") && len(name) > 1 {
						names = strings.Split(name, "") // -it: short flags together
					}
					for _, n := range names {
						if !flags[n] {
							t.Errorf("%s: `staticpod %s` has no flag %s", at(), cmd, w)
							break
						}
					}
				}
			}
		}
	}
}

// apiServer is the daemon's API as staticpod run assembles it (api, runner, revisions
// and diskspace on one registry), its backend holding one running pod and its usage
// sample one node, pod and container, so that every metric has a series.
func apiServer(t *testing.T) (http.Handler, map[string]bool) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recorder{Registerer: reg, names: map[string]bool{}}
	revs, err := revisions.Open(revisions.Options{Dir: filepath.Join(t.TempDir(), "revisions"), Registry: rec})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Options{ResultsDir: filepath.Join(t.TempDir(), "results"), Revisions: revs, Registry: rec})
	if err != nil {
		t.Fatal(err)
	}
	diskspace.New(map[string]string{"root": t.TempDir()}, r.Events(), rec, nil)
	s, err := api.New(api.Config{Backend: onePod{r}, Stats: oneSample{}, Registry: reg,
		Socket: filepath.Join(t.TempDir(), "api.sock")})
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler(), rec.names
}

// recorder registers collectors and records the names of the metrics they describe:
// those with no series yet (a gauge vector set by a loop that has not run) included.
type recorder struct {
	prometheus.Registerer
	names map[string]bool
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() { c.Describe(descs); close(descs) }()
	for d := range descs {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return r.Registerer.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// onePod is the runner with one running pod of one container.
type onePod struct{ *runner.Runner }

func (onePod) Pods() []*corev1.Pod {
	return []*corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-node1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true}}},
	}}
}

// oneSample is a usage sample of a node with one pod of one container.
type oneSample struct{}

func (oneSample) Summary() *statsapi.Summary {
	now := metav1.Now()
	n := uint64(1)
	cpu := &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &n}
	mem := &statsapi.MemoryStats{Time: now, WorkingSetBytes: &n}
	return &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node1", CPU: cpu, Memory: mem},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Namespace: "default", Name: "web-node1"}, CPU: cpu, Memory: mem,
			Containers: []statsapi.ContainerStats{{Name: "web", StartTime: now, CPU: cpu, Memory: mem}},
		}},
	}
}

// served returns the metric families an endpoint serves, by their # TYPE lines.
func served(t *testing.T, h http.Handler, path string) map[string]bool {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(rec.Body.String(), -1) {
		names[m[1]] = true
	}
	return names
}

// TestDocsNameOnlyMetricsThatAreServed checks every staticpod_ metric named in
// README.md and docs/*.md (a histogram's _count, _sum and _bucket series by its name),
// and every metric of the documents' metric tables, against what /metrics and
// /metrics/resource serve.
func TestDocsNameOnlyMetricsThatAreServed(t *testing.T) {
	h, have := apiServer(t)
	for name := range served(t, h, "/metrics") {
		have[name] = true
	}
	for name := range served(t, h, "/metrics/resource") {
		have[name] = true
	}
	named := regexp.MustCompile(`(\^?)(staticpod_[a-z_]*[a-z])(_?\*)?`)
	tableRow := regexp.MustCompile("^\\| `([a-z_]+)`(?:, `([a-z_]+)`)? \\| (?:gauge|counter|histogram|summary) \\|")
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			var names []string
			for _, m := range named.FindAllStringSubmatch(line, -1) {
				if m[1] != "" || m[3] != "" { // staticpod_image_gc_* or grep ^staticpod_image_gc: a prefix
					if !hasPrefix(have, m[2]) {
						t.Errorf("%s:%d: no metric served on /metrics begins with %s", file, i+1, m[2])
					}
					continue
				}
				names = append(names, m[2])
			}
			if m := tableRow.FindStringSubmatch(line); m != nil {
				names = append(names, m[1], m[2])
			}
			for _, n := range names {
				if n == "" {
					continue
				}
				base := n
				for _, suffix := range []string{"_count", "_sum", "_bucket"} {
					if b, ok := strings.CutSuffix(n, suffix); ok && have[b] {
						base = b
					}
				}
				if !have[base] {
					t.Errorf("%s:%d: metric %s is served neither on /metrics nor on /metrics/resource", file, i+1, n)
				}
			}
		}
	}
}

// TestReferenceNamesOnlyServedEndpoints checks every endpoint of docs/reference.md
// ("GET /pods/{namespace}/{name}" and the like) against the API's routes: the path, its
// placeholders filled in, must reach a route of its own for that method, not the
// fallback that answers 404 and 405.
func TestReferenceNamesOnlyServedEndpoints(t *testing.T) {
	h, _ := apiServer(t)
	mux, ok := h.(*http.ServeMux)
	if !ok {
		t.Fatal("the API's handler is not its route table")
	}
	data, err := os.ReadFile("docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := regexp.MustCompile("`(GET|PUT|POST|DELETE|PATCH|HEAD) (/[^` ?]*)")
	placeholder := regexp.MustCompile(`\{[^}]+\}`)
	seen := 0
	for i, line := range strings.Split(string(data), "\n") {
		for _, m := range endpoint.FindAllStringSubmatch(line, -1) {
			seen++
			path := placeholder.ReplaceAllString(m[2], "x")
			if !routed(mux, m[1], path) {
				t.Errorf("docs/reference.md:%d: %s %s is not served (no route; the fallback answers it)", i+1, m[1], m[2])
			}
		}
	}
	if seen < 10 {
		t.Errorf("docs/reference.md names %d endpoints; the pattern that finds them is broken", seen)
	}
}

// routed tells whether mux has a route of its own for method and path; a path ending in
// "/..." stands for any path below, one to four segments deep.
func routed(mux *http.ServeMux, method, path string) bool {
	paths := []string{path}
	if below, ok := strings.CutSuffix(path, "/..."); ok {
		paths = []string{below + "/x", below + "/x/x", below + "/x/x/x", below + "/x/x/x/x"}
	}
	for _, p := range paths {
		if _, pattern := mux.Handler(httptest.NewRequest(method, p, nil)); pattern != "" && pattern != "/" {
			return true
		}
	}
	return false
}

func hasPrefix(names map[string]bool, prefix string) bool {
	for n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// TestReferenceTablesListEveryFlag checks the other direction: every flag of every
// command staticpod --help shows has a row in a flag table of its section of
// docs/reference.md ("### staticpod <command>"; the client flags in that of ps), with
// the flag's environment variable in the table's environment column, "none" for a flag
// without one ("as for `run`": run's row).
func TestReferenceTablesListEveryFlag(t *testing.T) {
	data, err := os.ReadFile("docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	flagName := regexp.MustCompile("`--([a-z0-9-]+)`")
	cellSep := regexp.MustCompile(`[^\\]\|`)
	env := map[string]map[string]string{} // section -> flag -> environment column ("?" when the table has none)
	section, envCol := "", -1
	for _, line := range strings.Split(string(data), "\n") {
		if cmd, ok := strings.CutPrefix(line, "### staticpod "); ok {
			section = cmd
			env[section] = map[string]string{}
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section = ""
		}
		if section == "" || !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := cellSep.Split(" "+strings.TrimSuffix(line, "|"), -1)[1:]
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "flag" {
			envCol = slices.Index(cells, "environment")
			continue
		}
		for _, m := range flagName.FindAllStringSubmatch(cells[0], -1) {
			env[section][m[1]] = "?"
			if envCol >= 0 && envCol < len(cells) {
				env[section][m[1]] = cells[envCol]
			}
		}
	}
	for _, c := range newApp().VisibleCommands() {
		for _, f := range c.VisibleFlags() {
			name := f.Names()[0]
			col, ok := env[c.Name][name]
			if !ok {
				col, ok = env["ps"][name] // the client flags, shown once
			}
			if !ok {
				t.Errorf("docs/reference.md: the table of staticpod %s has no row for --%s", c.Name, name)
				continue
			}
			if col == "as for `run`" {
				col = env["run"][name]
			}
			want := "none"
			if vars := envVars(f); len(vars) > 0 {
				want = "`" + strings.Join(vars, "`, `") + "`"
			}
			if col != "?" && col != want {
				t.Errorf("docs/reference.md: staticpod %s --%s: environment %s, but the flag reads %s", c.Name, name, col, want)
			}
		}
	}
}

func envVars(f cli.Flag) []string {
	if e, ok := f.(interface{ GetEnvVars() []string }); ok {
		return e.GetEnvVars()
	}
	return nil
}
