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
// CRI log files); nothing imports main.
func TestImportDirection(t *testing.T) {
	allowed := map[string][]string{
		"manifests":    nil,
		"logs":         nil,
		"watcher":      {"manifests"},
		"httpsource":   {"manifests"},
		"runner":       {"manifests"},
		"containerdrt": {"manifests", "runner", "logs"},
		"api":          {"manifests", "runner", "logs", "httpsource"},
	}
	for pkg, ok := range allowed {
		out, err := exec.Command("go", "list", "-deps", "./"+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if (pkg == "runner" || pkg == "api") && strings.HasPrefix(dep, "github.com/containerd/") {
				t.Errorf("%s imports %s: it must not know containerd", pkg, dep)
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
