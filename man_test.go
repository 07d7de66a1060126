package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	spcli "github.com/staticpod/staticpod/cli"
)

// render formats a man page as a reader sees it: with man -l where man is installed,
// else with groff's man macros; without either, the test is skipped (never under CI).
func render(t *testing.T, file string) string {
	t.Helper()
	var cmd *exec.Cmd
	if man, err := exec.LookPath("man"); err == nil {
		cmd = exec.CommandContext(t.Context(), man, "-l", file)
	} else if groff, err := exec.LookPath("groff"); err == nil {
		cmd = exec.CommandContext(t.Context(), groff, "-man", "-Tutf8", file)
	} else {
		if os.Getenv("CI") == "true" {
			t.Fatal("neither man nor groff is installed")
		}
		t.Skip("neither man nor groff is installed")
	}
	cmd.Env = append(os.Environ(), "MANWIDTH=200", "MANPAGER=cat", "PAGER=cat", "GROFF_NO_SGR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	// Undo the overstrike of bold and underline that groff's tty output may hold.
	text := string(out)
	for strings.Contains(text, "\b") {
		i := strings.Index(text, "\b")
		text = text[:i-1] + text[i+1:]
	}
	return text
}

// TestManPagesShowEveryCommandAndFlag renders staticpod(8) and staticpod-COMMAND(8) as
// make man writes them and reads them through man: the first names every command
// --help shows, each of the others its command's usage and every flag.
func TestManPagesShowEveryCommandAndFlag(t *testing.T) {
	app := newApp()
	pages, err := spcli.ManPages(app)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, page := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	main := render(t, filepath.Join(dir, "staticpod.8"))
	lines := map[string]bool{}
	for _, l := range strings.Split(main, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, c := range app.VisibleCommands() {
		if c.Name == "help" {
			continue
		}
		if !lines[c.Name] {
			t.Errorf("staticpod(8) has no heading for the command %s:\n%s", c.Name, main)
		}
		page := render(t, filepath.Join(dir, "staticpod-"+c.Name+".8"))
		if want := "staticpod-" + c.Name + " - " + c.Usage; !strings.Contains(strings.Join(strings.Fields(page), " "), want) {
			t.Errorf("staticpod-%s(8) lacks %q:\n%s", c.Name, want, page)
		}
		for _, f := range c.VisibleFlags() {
			if !strings.Contains(page, "--"+f.Names()[0]) {
				t.Errorf("staticpod-%s(8) lacks --%s", c.Name, f.Names()[0])
			}
		}
	}
	for _, hidden := range []string{"pause", "logger", "man"} {
		if lines[hidden] {
			t.Errorf("staticpod(8) shows the hidden command %s", hidden)
		}
	}
}
