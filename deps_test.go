package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/staticpod/staticpod"

// rules names, for every package of the module (by its path in the module, "" for main),
// the packages of ours it may depend on, directly or not; "*" is any. They enforce the
// package rules of DESIGN.md: manifests, logs and api/wire (what travels between the API
// and its clients) import nothing of ours; sources import manifests; runner imports
// manifests and api/wire and the packages below it: runner/action, which runs a
// probe's or hook's handler against an interface of its own and imports nothing of
// ours; runner/sysctl, the kubelet's sysctl rules as pure functions, which imports
// only manifests; runner/revisions, the pods' Ready revisions and rollbacks on disk,
// which imports only manifests; runner/node, the node's labels, taints and
// allocatable and whether a pod fits them, which imports only manifests; runner/imagegc (image garbage collection),
// runner/pulling (a pull's progress in a pod's status) and runner/events (the event
// log, whose records are wire.Events), which import only api/wire;
// and the leaves runner/results, runner/backoff and runner/prepull (none imports the
// runner; whoever may import the runner may import them, "runner/..."); containerdrt
// imports manifests and runner (and logs, a leaf that names and writes the CRI log
// files) and the packages along its seams, below it:
// containerdrt/images, the image store, wraps containerd's client and imports only
// runner, for the image types it returns and the classes of a failed pull;
// containerdrt/spec builds OCI specs from what it is given and no more, so it imports
// only manifests, runner (for their types and error classes) and cgroups (the kubelet's
// CPU conversions); containerdrt/poddir, which prepares the pod directories and the
// host side of the mounts that the spec names, imports spec for its input and the
// downward API's values; once runs pods through containerdrt and the runner ("x/..."
// in a rule is x and every package below it); validate runs the daemon's own checks
// (watcher, runner) without a daemon; the
// commands of cli talk to the daemon only, through api/client, exec included; the
// daemon's parts that are neither source nor runtime (disk-space faults, the systemd
// service, graceful node shutdown) are packages of their own under internal, which
// main wires to the runner; the helper program links only the log writer and the
// sandbox process; internal/proc, a leaf, is the one reader of /proc (the runtime's
// shim scans, the benchmarks' and the test environment's process lists); the packages
// along containerdrt's seams import neither containerdrt nor each other's concerns, so
// that each is found by its name below the runtime: images (the image store; runner for
// its image types), cgroups (the driver, pod cgroups and their limits), podnet (pod
// networks through CNI), handlers (the runtime handlers: a leaf), pins (a pod's
// namespaces made and pinned as files: the user namespace's size and the sandbox
// process's loopback setup, nothing of the runtime), shims (finding and ending shims and log writers from /proc,
// runc's and containerd's leftovers on the disk: only internal/proc and logs, never the
// runtime it serves) and stats (usage read from the cgroups: cgroups and logs);
// internal/atomicfile, a leaf, writes a file whole; internal/gcpace, a leaf, paces
// main's garbage collector by the runner's work; only main imports everything. A package added to the module needs a rule here.
var rules = map[string][]string{
	"":                              {"*"},
	"manifests":                     nil,
	"logs":                          nil,
	"watcher":                       {"manifests"},
	"httpsource":                    {"manifests"},
	"api/wire":                      nil,
	"containerdrt/internal/podtest": {"manifests"}, // for the tests of containerdrt and its seams: pods, files, mounts
	"runner/results":                nil,           // a leaf: the finished pods on disk
	"runner/backoff":                nil,           // a leaf: the restart back-off of containers
	"runner/imagegc":                {"api/wire"},  // image garbage collection: its rules and its collector
	"runner/prepull":                nil,           // a leaf: pulls an edited pod's images before its running instance stops, against an interface of its own
	"runner/pulling":                {"api/wire"},  // a pull's progress in a pod's status
	"runner/events":                 {"api/wire"},  // the event log: a record is a wire.Event
	"runner/revisions":              {"manifests"}, // the pods' Ready revisions and rollbacks on disk: never the runner
	"runner":                        {"manifests", "api/wire", "runner/action", "runner/sysctl", "runner/results", "runner/backoff", "runner/prepull", "runner/imagegc", "runner/pulling", "runner/revisions", "runner/node", "runner/restrict", "runner/devices", "runner/events"},
	"runner/devices":                nil,                            // the device plugins' devices and their checkpoint: never the runner or containerd
	"runner/devices/plugintest":     nil,                            // a device plugin for tests, on k8s.io/kubelet's API alone
	"runner/node":                   {"manifests"},                  // the node (labels, taints, allocatable) and whether a pod fits it: pure rules, never the runner
	"runner/restrict":               {"manifests", "runner/sysctl"}, // what each source's pods may ask for, and which sysctls: pure rules, never the runner
	"runner/action":                 nil,                            // handlers of probes and hooks, against an interface of its own: never the runner
	"runner/sysctl":                 {"manifests"},                  // a sysctl's dotted name: pure rules, never the runner
	"containerdrt":                  {"containerdrt/...", "manifests", "runner/...", "api/wire", "logs", "internal/pause", "internal/systemd", "internal/proc", "internal/atomicfile"},
	"containerdrt/images":           {"runner/...", "manifests", "api/wire"},                                                                                                                // runner.Image, StoredImage, FSUsage and the pull errors; runner brings manifests and api/wire
	"containerdrt/shims":            {"logs", "internal/proc"},                                                                                                                              // /proc and the disk: it knows no runtime, runner or containerd client
	"containerdrt/cgroups":          {"manifests", "internal/systemd"},                                                                                                                      // QoS classes and pod limits; pod slices under systemd
	"containerdrt/stats":            {"containerdrt/cgroups", "manifests", "internal/systemd", "logs"},                                                                                      // usage from the cgroups: where they are, and the pods' log dirs
	"containerdrt/handlers":         nil,                                                                                                                                                    // a leaf: the runtime handlers and their runc options, from containerd's CRI configuration and the flags
	"containerdrt/podnet":           {"internal/atomicfile"},                                                                                                                                // the default network's configuration, written whole
	"containerdrt/pins":             {"containerdrt/userns", "internal/pause"},                                                                                                              // makes and pins a pod's namespaces: the user namespace's size, loopback up
	"containerdrt/userns":           {"internal/atomicfile"},                                                                                                                                // a leaf: user namespace mappings of pods, kept in their directories
	"containerdrt/spec":             {"containerdrt/cgroups", "manifests", "runner/...", "api/wire", "internal/systemd"},                                                                    // pure builders: the types and error classes of what they build from, the CPU conversions
	"containerdrt/poddir":           {"containerdrt/spec", "containerdrt/userns", "containerdrt/cgroups", "manifests", "runner/...", "api/wire", "internal/systemd", "internal/atomicfile"}, // spec's input and downward API values
	"api":                           {"manifests", "runner/...", "api/wire", "logs", "httpsource"},
	"api/apitest":                   {"api/wire"},
	"api/client":                    {"api/wire", "manifests"},
	"cli":                           {"api/client", "api/wire", "manifests"},
	"validate":                      {"cli", "api/client", "api/wire", "watcher", "manifests", "runner/..."},
	"once":                          {"cli", "api/client", "api/wire", "containerdrt/...", "internal/atomicfile", "watcher", "manifests", "runner/...", "logs", "internal/pause", "internal/ctrd", "internal/helper", "internal/systemd", "internal/proc"},
	"e2e":                           nil, // its tests import what they test
	"internal/ctrd":                 nil,
	"internal/dirlock":              nil,                                                         // main's lock of the root and pod log dirs
	"internal/diskspace":            {"runner/events", "api/wire"},                               // records its events in the event log, never through the runner
	"internal/service":              {"internal/systemd"},                                        // reads the runner through an interface of its own
	"internal/nodeshutdown":         {"runner/...", "manifests", "api/wire", "internal/systemd"}, // stops the pods through the runner
	"internal/pause":                nil,
	"internal/buildinfo":            nil, // a leaf: the build's version, commit and date
	"internal/systemd":              nil,
	"internal/proc":                 nil, // a leaf: whoever reads /proc may use it
	"internal/atomicfile":           nil, // a leaf: whoever writes a file whole may use it
	"internal/gcpace":               nil, // a leaf: main paces its collector with it
	"internal/helper":               nil, // it embeds the helper program's bytes, not its packages
	helperCommand:                   {"logs", "internal/pause"},
	"internal/testenv":              {"internal/ctrd", "internal/proc"},
	"internal/testenv/cmd/mkimage":  {"internal/testenv", "internal/ctrd", "internal/proc"},
	"internal/testenv/cmd/udpecho":  nil,
	"internal/bench":                {"containerdrt/...", "internal/atomicfile", "runner/...", "api/wire", "manifests", "logs", "internal/pause", "internal/systemd", "internal/testenv", "internal/ctrd", "internal/proc"},
	benchCommand:                    {"internal/bench", "containerdrt/...", "internal/atomicfile", "runner/...", "api/wire", "manifests", "logs", "internal/pause", "internal/systemd", "internal/testenv", "internal/ctrd", "internal/proc"},
}

// benchCommand is make bench's program.
const benchCommand = "internal/bench/cmd/staticpod-bench"

// helperCommand is the program that runs once per container and per sandbox: every
// package it links costs memory in each of them.
const helperCommand = "internal/helper/cmd/staticpod-helper"

// containerdWrappers are the packages that may import containerd's: every other package
// reaches containerd through them, or not at all. The benchmarks are among them: their
// floors are containerd alone, and their clock is containerd's events. Of the packages
// along containerdrt's seams, images holds containerd's client, cgroups hands runc's
// options to a new container, handlers a runtime handler's runtime type and runc options, podnet runs CNI through containerd's go-cni, spec builds
// containerd's OCI spec options (pkg/oci) and nothing else, and shims imports what a
// container ID may be and the type of a listed task, not the client; poddir imports
// none of containerd.
var containerdWrappers = []string{"containerdrt", "containerdrt/images", "containerdrt/shims", "containerdrt/cgroups", "containerdrt/handlers", "containerdrt/podnet", "containerdrt/spec", "internal/ctrd", "internal/testenv", "internal/bench"}

// commands are the packages that may depend on urfave/cli: a Go program must be able to
// use any other, api/client first, without a command line.
var commands = []string{"", "cli", "once", "validate"}

// clients are the packages a program links to talk to the daemon: they must not link
// the daemon. A client of the API (and the commands that only talk to it) carries
// neither the runner nor containerd nor Prometheus, so that it stays small, starts
// fast and needs no access to containerd: the daemon does the work, exec included.
var clients = []string{"api/client", "api/wire", "cli"}

// pkg is what `go list` says of a package, without its tests: tests may import anything.
type pkg struct {
	ImportPath string
	Imports    []string // direct
	Deps       []string // direct and indirect
}

// own returns the path of a package of the module within it ("" for main), and whether
// it is one.
func own(importPath string) (string, bool) {
	if importPath == module {
		return "", true
	}
	return strings.CutPrefix(importPath, module+"/")
}

// listPackages returns every package of the module.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < len(rules)/2 {
		t.Fatalf("go list ./... found %d packages; is the test running in the module's root?", len(pkgs))
	}
	return pkgs
}

// TestImportDirection checks every package's dependencies against its rule: the packages
// of ours it may depend on, containerd only through one of containerdWrappers, urfave/cli
// only in commands, and main in none.
// allows reports whether a rule's list names the package d: by its path, or as "x/..."
// for x and every package below it.
func allows(allowed []string, d string) bool {
	for _, a := range allowed {
		if prefix, ok := strings.CutSuffix(a, "/..."); ok && (d == prefix || strings.HasPrefix(d, prefix+"/")) {
			return true
		}
		if a == d {
			return true
		}
	}
	return false
}

// anyMayUse are leaves (their own rule is nil) that every package may depend on: they
// carry no concern of staticpod's, only a way of doing something right once.
var anyMayUse = []string{"internal/atomicfile"}

func TestImportDirection(t *testing.T) {
	listed := map[string]bool{}
	for _, p := range listPackages(t) {
		name, _ := own(p.ImportPath)
		listed[name] = true
		allowed, ok := rules[name]
		if !ok {
			t.Errorf("package %s has no rule in deps_test.go: name the packages of ours it may import", p.ImportPath)
			continue
		}
		mayUseContainerd := slices.Contains(containerdWrappers, name) || slices.Contains(allowed, "*")
		for _, w := range containerdWrappers {
			mayUseContainerd = mayUseContainerd || allows(allowed, w)
		}
		for _, dep := range p.Deps {
			if strings.HasPrefix(dep, "github.com/containerd/") && !mayUseContainerd {
				t.Errorf("%s depends on %s: it must not know containerd", p.ImportPath, dep)
			}
			if strings.HasPrefix(dep, "github.com/urfave/cli") && !slices.Contains(commands, name) {
				t.Errorf("%s depends on %s: a Go program must be able to use it without a command line", p.ImportPath, dep)
			}
			d, ours := own(dep)
			switch {
			case !ours, slices.Contains(anyMayUse, d):
			case d == "":
				t.Errorf("%s imports main: nothing may", p.ImportPath)
			case !slices.Contains(allowed, "*") && !allows(allowed, d):
				t.Errorf("%s depends on %s; it may depend only on %v of staticpod's packages", p.ImportPath, d, allowed)
			}
		}
	}
	for name := range rules {
		if !listed[name] {
			t.Errorf("deps_test.go has a rule for %q, which is no package of the module", name)
		}
	}
}

// TestContainerdOnlyInItsWrappers checks that only containerdWrappers import containerd's
// packages themselves: once, the commands of cli and main reach containerd through
// containerdrt and internal/ctrd.
func TestContainerdOnlyInItsWrappers(t *testing.T) {
	for _, p := range listPackages(t) {
		name, _ := own(p.ImportPath)
		if slices.Contains(containerdWrappers, name) {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/containerd/") {
				t.Errorf("%s imports %s: only %v may; go through containerdrt", p.ImportPath, imp, containerdWrappers)
			}
		}
	}
}

// TestHelperDependsOnLittle checks that the helper program, which runs once per
// container and per sandbox, links nothing beyond the standard library,
// golang.org/x/sys, logs and internal/pause: no Kubernetes types, no gRPC, no
// initialisers that cost every copy memory.
func TestHelperDependsOnLittle(t *testing.T) {
	for _, p := range listPackages(t) {
		if name, _ := own(p.ImportPath); name != helperCommand {
			continue
		}
		for _, dep := range p.Deps {
			first, _, _ := strings.Cut(dep, "/")
			d, ours := own(dep)
			switch {
			case ours && (d == "logs" || d == "internal/pause"):
			case !ours && !strings.Contains(first, "."): // the standard library
			case strings.HasPrefix(dep, "golang.org/x/sys/"):
			default:
				t.Errorf("%s depends on %s: it may depend only on the standard library, golang.org/x/sys, logs and internal/pause", p.ImportPath, dep)
			}
		}
		return
	}
	t.Errorf("go list ./... does not list %s", helperCommand)
}

// TestClientsLinkNoDaemon checks that the clients link none of the daemon: not the
// runner, not containerd, not Prometheus.
func TestClientsLinkNoDaemon(t *testing.T) {
	found := 0
	for _, p := range listPackages(t) {
		name, _ := own(p.ImportPath)
		if !slices.Contains(clients, name) {
			continue
		}
		found++
		for _, dep := range p.Deps {
			d, ours := own(dep)
			if ours && d == "runner" || strings.HasPrefix(dep, "github.com/containerd/") || strings.HasPrefix(dep, "github.com/prometheus/") {
				t.Errorf("%s depends on %s: a client of the API must not link the daemon", p.ImportPath, dep)
			}
		}
	}
	if found != len(clients) {
		t.Errorf("go list ./... lists %d of the clients %v", found, clients)
	}
}

// The house's bounds (STYLE.md): a package of more than 5,000 lines of code is doing
// several jobs and wants to be laid out along its seams, and a file of more than 500 is
// several files. The root package is the commands' wiring only: what grows past 6
// files or 700 lines there is a concern that wants a package. Tests are not counted.
const (
	maxPackageLines = 5000
	maxFileLines    = 500
	maxRootFiles    = 6
	maxRootLines    = 700
)

func TestPackagesAndFilesStayWithinTheirBounds(t *testing.T) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}\t{{join .GoFiles \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		dir, files, _ := strings.Cut(strings.TrimSpace(line), "\t")
		total := 0
		for _, f := range strings.Fields(files) {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			n := strings.Count(string(data), "\n")
			if n > maxFileLines {
				t.Errorf("%s has %d lines, more than %d: split it along its seams", filepath.Join(dir, f), n, maxFileLines)
			}
			total += n
		}
		if total > maxPackageLines {
			t.Errorf("package %s has %d lines of code, more than %d: lay it out along its seams", dir, total, maxPackageLines)
		}
		if dir == root && (len(strings.Fields(files)) > maxRootFiles || total > maxRootLines) {
			t.Errorf("the root package has %d files and %d lines, more than %d and %d: it is wiring only; move what is not into a package", len(strings.Fields(files)), total, maxRootFiles, maxRootLines)
		}
	}
}
