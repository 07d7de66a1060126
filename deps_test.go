package main

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/staticpod/staticpod"

// TestImportDirection enforces the package rules of DESIGN.md: manifests imports nothing
// of ours; sources import manifests; runner imports manifests and never containerd;
// containerdrt imports manifests and runner (and logs, a leaf that names and writes the
// CRI log files); once runs pods through containerdrt and the runner; the commands of
// cli read the daemon through api/client, which knows neither urfave/cli nor containerd;
// nothing imports main.
func TestImportDirection(t *testing.T) {
	allowed := map[string][]string{
		"manifests":    nil,
		"logs":         nil,
		"watcher":      {"manifests"},
		"httpsource":   {"manifests"},
		"runner":       {"manifests"},
		"containerdrt": {"manifests", "runner", "logs"},
		"api":          {"manifests", "runner", "logs", "httpsource"},
		"once":         {"cli", "api/client", "containerdrt", "watcher", "manifests", "runner", "logs"},
		"cli":          {"api/client", "containerdrt", "watcher", "manifests", "runner", "logs"},
		"api/client":   {"runner", "manifests"},
	}
	for pkg, ok := range allowed {
		out, err := exec.Command("go", "list", "-deps", "./"+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if (pkg == "runner" || pkg == "api" || pkg == "api/client") && strings.HasPrefix(dep, "github.com/containerd/") {
				t.Errorf("%s imports %s: it must not know containerd", pkg, dep)
			}
			if pkg == "api/client" && strings.HasPrefix(dep, "github.com/urfave/cli") {
				t.Errorf("%s imports %s: a Go program must be able to use it without a command line", pkg, dep)
			}
			own, found := strings.CutPrefix(dep, module+"/")
			if !found || own == pkg || strings.HasPrefix(own, "internal/") && pkg != "manifests" {
				continue
			}
			if !contains(ok, own) {
				t.Errorf("%s imports %s; it may import only %v of staticpod's packages", pkg, own, ok)
			}
		}
	}
}

// TestCommandsLeaveContainerdToContainerdrt enforces that once and the commands of cli
// reach containerd only through containerdrt (and internal/ctrd): none of their own
// imports is containerd's.
func TestCommandsLeaveContainerdToContainerdrt(t *testing.T) {
	for _, pkg := range []string{"once", "cli"} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./"+pkg).Output()
		if err != nil {
			t.Fatalf("go list ./%s: %v", pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if strings.HasPrefix(imp, "github.com/containerd/") {
				t.Errorf("%s imports %s: it must leave containerd to containerdrt", pkg, imp)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
