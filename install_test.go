package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tarballFiles are the files of a release tarball that install.sh installs, by their
// name there (hack/release.sh lays them out so), and where they come from.
var tarballFiles = map[string]string{
	"staticpod.service": "contrib/systemd/staticpod.service",
	"staticpod.openrc":  "contrib/openrc/staticpod",
	"staticpod.default": "contrib/default/staticpod",
	"install.sh":        "contrib/install.sh",
}

// unpacked lays out a release tarball's directory as hack/release.sh does, with a script
// standing in for the binary, and its SHA256SUMS.
func unpacked(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), data, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("staticpod", []byte("#!/bin/sh\necho staticpod test\n"), 0o755)
	for name, src := range tarballFiles {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		write(name, data, 0o644)
	}
	var sums strings.Builder
	for _, name := range []string{"staticpod", "staticpod.service", "staticpod.openrc", "staticpod.default"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		sums.WriteString(hex.EncodeToString(sum[:]) + "  " + name + "\n")
	}
	write("SHA256SUMS", []byte(sums.String()), 0o644)
	return dir
}

// shells are the POSIX shells install.sh is run with: Debian's sh (dash) and busybox's,
// which Alpine and Buildroot have.
func shells(t *testing.T) []string {
	var out []string
	for _, sh := range [][]string{{"dash"}, {"busybox", "sh"}} {
		if _, err := exec.LookPath(sh[0]); err == nil {
			out = append(out, strings.Join(sh, " "))
		}
	}
	if len(out) == 0 {
		t.Fatal("neither dash nor busybox is installed")
	}
	return out
}

// runInstall runs dir's install.sh with shell and args, and returns its output.
func runInstall(t *testing.T, shell, dir string, wantOK bool, args ...string) string {
	t.Helper()
	argv := append(strings.Fields(shell), append([]string{filepath.Join(dir, "install.sh")}, args...)...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if (err == nil) != wantOK {
		t.Fatalf("%s install.sh %s: %v (want success %v)\n%s", shell, strings.Join(args, " "), err, wantOK, out)
	}
	return string(out)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestInstallScriptInstallsTwiceAndUninstalls runs install.sh into a temporary root
// twice, for systemd and for OpenRC, under each POSIX shell: the first run installs the
// binary, the service with the binary's path in it, the defaults file and the
// directories; the second changes nothing and keeps an edited defaults file; --uninstall
// removes what install put there but the edited defaults file and the data directories.
func TestInstallScriptInstallsTwiceAndUninstalls(t *testing.T) {
	for _, shell := range shells(t) {
		for _, tc := range []struct {
			init, service, wantLine string
			mode                    os.FileMode
		}{
			{"systemd", "etc/systemd/system/staticpod.service", "ExecStart=/opt/sp/bin/staticpod run", 0o644},
			{"openrc", "etc/init.d/staticpod", `command="/opt/sp/bin/staticpod"`, 0o755},
		} {
			t.Run(strings.ReplaceAll(shell, " ", "-")+"/"+tc.init, func(t *testing.T) {
				dir, root := unpacked(t), t.TempDir()
				args := []string{"--root", root, "--prefix", "/opt/sp", "--init", tc.init}
				out := runInstall(t, shell, dir, true, args...)
				bin := filepath.Join(root, "opt/sp/bin/staticpod")
				if got := readFile(t, bin); got != readFile(t, filepath.Join(dir, "staticpod")) || mode(t, bin) != 0o755 {
					t.Errorf("%s: %q, mode %v; want the tarball's binary, 0755\n%s", bin, got, mode(t, bin), out)
				}
				svc := filepath.Join(root, tc.service)
				if got := readFile(t, svc); !strings.Contains(got, "\n"+tc.wantLine+"\n") || mode(t, svc) != tc.mode {
					t.Errorf("%s lacks the line %s (mode %v, want %v):\n%s", svc, tc.wantLine, mode(t, svc), tc.mode, got)
				}
				defaults := filepath.Join(root, "etc/default/staticpod")
				if readFile(t, defaults) != readFile(t, "contrib/default/staticpod") {
					t.Errorf("%s is not contrib/default/staticpod", defaults)
				}
				for _, d := range []string{"etc/kubernetes/manifests", "var/lib/staticpod", "var/log/pods", "var/log/containers"} {
					if st, err := os.Stat(filepath.Join(root, d)); err != nil || !st.IsDir() {
						t.Errorf("no directory %s: %v", d, err)
					}
				}

				edited := "STATICPOD_IMAGE_DIR=/srv/images\n"
				if err := os.WriteFile(defaults, []byte(edited), 0o644); err != nil {
					t.Fatal(err)
				}
				out = runInstall(t, shell, dir, true, args...)
				if strings.Contains(out, "installed ") || !strings.Contains(out, "kept "+defaults) {
					t.Errorf("the second run installed something again, or did not keep the edited %s:\n%s", defaults, out)
				}
				if readFile(t, defaults) != edited {
					t.Errorf("the second run overwrote the edited %s", defaults)
				}

				runInstall(t, shell, dir, true, append(args, "--uninstall")...)
				for _, gone := range []string{bin, svc} {
					if exists(gone) {
						t.Errorf("--uninstall left %s", gone)
					}
				}
				if readFile(t, defaults) != edited {
					t.Errorf("--uninstall removed or changed the edited %s", defaults)
				}
				if !exists(filepath.Join(root, "var/lib/staticpod")) {
					t.Error("--uninstall removed /var/lib/staticpod, the pods' data")
				}
			})
		}
	}
}

// TestInstallScriptUninstallRemovesAnUneditedDefaultsFile: the defaults file as
// installed is install's, and goes with --uninstall.
func TestInstallScriptUninstallRemovesAnUneditedDefaultsFile(t *testing.T) {
	dir, root := unpacked(t), t.TempDir()
	runInstall(t, "sh", dir, true, "--root", root, "--init", "none")
	runInstall(t, "sh", dir, true, "--root", root, "--uninstall")
	for _, gone := range []string{"etc/default/staticpod", "usr/local/bin/staticpod"} {
		if exists(filepath.Join(root, gone)) {
			t.Errorf("--uninstall left %s", gone)
		}
	}
}

// TestInstallScriptRefusesFilesThatDoNotMatchTheirSums: a binary or service file changed
// after the release, or a SHA256SUMS without it, installs nothing.
func TestInstallScriptRefusesFilesThatDoNotMatchTheirSums(t *testing.T) {
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"changed binary", "staticpod", "#!/bin/sh\necho evil\n", "do not match their SHA256SUMS"},
		{"changed unit", "staticpod.service", "[Service]\nExecStart=/bin/evil\n", "do not match their SHA256SUMS"},
		{"binary not listed", "SHA256SUMS", "", "lists no staticpod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, root := unpacked(t), t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.content), 0o755); err != nil {
				t.Fatal(err)
			}
			out := runInstall(t, "sh", dir, false, "--root", root, "--init", "systemd")
			if !strings.Contains(out, tc.want) {
				t.Errorf("install.sh said\n%s\nwant it to say %q", out, tc.want)
			}
			entries, err := os.ReadDir(root)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Errorf("install.sh refused but wrote into the root: %v", entries)
			}
		})
	}
}

// TestOpenRCScriptIsShellWithTheCommandInstallRewrites checks contrib/openrc/staticpod
// as far as this machine can without OpenRC: it parses as POSIX sh under each shell, it
// is an openrc-run script run by supervise-daemon, and its command line is the one
// install.sh points at the installed binary.
func TestOpenRCScriptIsShellWithTheCommandInstallRewrites(t *testing.T) {
	const script = "contrib/openrc/staticpod"
	for _, shell := range shells(t) {
		argv := append(strings.Fields(shell), "-n", script)
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", shell, script, err, out)
		}
	}
	text := readFile(t, script)
	for _, line := range []string{"#!/sbin/openrc-run", `supervisor="supervise-daemon"`, `command="/usr/local/bin/staticpod"`, "depend() {", "start_pre() {"} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("%s lacks the line %s", script, line)
		}
	}
	if mode(t, script)&0o111 == 0 {
		t.Errorf("%s is not executable", script)
	}
}
