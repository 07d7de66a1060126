package helper

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

// build is a tree as the build leaves it: the README and the program for one
// architecture.
func build(arch, program string) fstest.MapFS {
	return fstest.MapFS{
		"bin/README":               {Data: []byte("placeholder")},
		"bin/" + Name + "-" + arch: {Data: []byte(program)},
	}
}

func mustInstall(t *testing.T, fsys fstest.MapFS, dir string) string {
	t.Helper()
	path, err := install(fsys, "amd64", dir)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if want := filepath.Join(dir, Name); path != want {
		t.Fatalf("install returned %s, want %s", path, want)
	}
	return path
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestInstallWritesAnExecutable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root", "bin") // made by install
	path := mustInstall(t, build("amd64", "v1"), dir)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o755 {
		t.Errorf("mode %v, want 0755", got)
	}
	if got := mustRead(t, path); got != "v1" {
		t.Errorf("installed %q, want v1", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d files, want the program alone", len(entries))
	}
}

func TestInstallKeepsTheSameProgram(t *testing.T) {
	dir := t.TempDir()
	path := mustInstall(t, build("amd64", "v1"), dir)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	mustInstall(t, build("amd64", "v1"), dir)
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("a second install of the same program replaced the file")
	}
}

// A new program replaces the file by rename: what runs the old one (a hard link here,
// a running process in production) keeps the old content.
func TestInstallReplacesByRename(t *testing.T) {
	dir := t.TempDir()
	path := mustInstall(t, build("amd64", "v1"), dir)
	running := filepath.Join(t.TempDir(), "running")
	if err := os.Link(path, running); err != nil {
		t.Fatal(err)
	}
	mustInstall(t, build("amd64", "v2"), dir)
	if got := mustRead(t, path); got != "v2" {
		t.Errorf("installed %q after an upgrade, want v2", got)
	}
	if got := mustRead(t, running); got != "v1" {
		t.Errorf("the old program's file now holds %q, want v1: it was written in place", got)
	}
}

// A file that is not the program, or not executable, is replaced.
func TestInstallRepairs(t *testing.T) {
	for name, prepare := range map[string]func(path string) error{
		"short":          func(path string) error { return os.WriteFile(path, []byte("v"), 0o755) },
		"same length":    func(path string) error { return os.WriteFile(path, []byte("xx"), 0o755) },
		"not executable": func(path string) error { return os.WriteFile(path, []byte("v1"), 0o644) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := prepare(filepath.Join(dir, Name)); err != nil {
				t.Fatal(err)
			}
			path := mustInstall(t, build("amd64", "v1"), dir)
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, path); got != "v1" || info.Mode().Perm() != 0o755 {
				t.Errorf("installed %q mode %v, want v1 mode 0755", got, info.Mode().Perm())
			}
		})
	}
}

func TestInstallWithoutTheProgram(t *testing.T) {
	dir := t.TempDir()
	for name, fsys := range map[string]fstest.MapFS{
		"placeholder only":    {"bin/README": {Data: []byte("placeholder")}},
		"another arch's only": build("arm64", "v1"),
	} {
		if _, err := install(fsys, "amd64", dir); !errors.Is(err, ErrNotEmbedded) {
			t.Errorf("%s: install = %v, want ErrNotEmbedded", name, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("install without a program wrote %d files", len(entries))
	}
}

// InstallUnder falls back to staticpod itself ("") with one warning when the binary
// carries no helper, and installs it into <root>/bin when it does. Which of the two
// this test binary does depends on how it was built, so both are accepted.
func TestInstallUnder(t *testing.T) {
	root := t.TempDir()
	var logged bytes.Buffer
	path, err := InstallUnder(root, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	switch lines := strings.Count(logged.String(), "\n"); {
	case path == "" && (lines != 1 || !strings.Contains(logged.String(), "level=WARN")):
		t.Errorf("without the helper, want one warning; logged:\n%s", logged.String())
	case path != "" && path != filepath.Join(root, "bin", Name):
		t.Errorf("InstallUnder(%s) = %s, want %s", root, path, filepath.Join(root, "bin", Name))
	case path != "" && lines != 0:
		t.Errorf("with the helper, want no log; logged:\n%s", logged.String())
	case path != "":
		want, err := embedded.ReadFile("bin/" + Name + "-" + runtime.GOARCH)
		if err != nil || mustRead(t, path) != string(want) {
			t.Errorf("%s is not the embedded program (%v)", path, err)
		}
	}
}
