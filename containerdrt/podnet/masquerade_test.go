package podnet

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/internal/testenv"
)

// A configuration list asks for staticpod's masquerade with the subnet it names; one
// naming anything but an IPv4 subnet is refused, with the key.
func TestMasqueradeOf(t *testing.T) {
	for _, tt := range []struct {
		conf, want, err string
	}{
		{`{"name": "n", "plugins": []}`, "", ""},
		{`{"name": "n", "io.staticpod.masquerade": "10.87.0.0/16"}`, "n 10.87.0.0/16", ""},
		{`{"name": "n", "io.staticpod.masquerade": "10.87.0.1/16"}`, "", `io.staticpod.masquerade: "10.87.0.1/16" is not an IPv4 subnet`},
		{`{"name": "n", "io.staticpod.masquerade": "fd00::/64"}`, "", `io.staticpod.masquerade: "fd00::/64" is not an IPv4 subnet`},
		{`{"name": "n", "io.staticpod.masquerade": "eth0"}`, "", `io.staticpod.masquerade: "eth0" is not an IPv4 subnet`},
		{`{"name": "n", "io.staticpod.masquerade": ""}`, "", `io.staticpod.masquerade: "" is not an IPv4 subnet`},
		{`{"name": "n", "io.staticpod.masquerade": true}`, "", `io.staticpod.masquerade: true is not an IPv4 subnet`},
	} {
		m, err := masqueradeOf([]byte(tt.conf))
		got := ""
		if m != nil {
			got = m.network + " " + m.subnet
		}
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && err.Error() != tt.err {
			t.Errorf("masqueradeOf(%s) = %q, %v; want %q, %q", tt.conf, got, err, tt.want, tt.err)
		}
	}
}

// The masquerade is put in place once, whatever number of pods ask for the network,
// and again when a pod asks after a reload of the host's firewall took it.
func TestMasqueradeIsKeptInPlace(t *testing.T) {
	cn := testenv.CNI(t, func(n testenv.CNINetwork) []byte {
		return Bridge{Name: n.Name, Bridge: n.Bridge, Subnet: n.Subnet, DataDir: n.DataDir}.Conflist()
	})
	n := New(Config{ConfDir: cn.ConfDir, BinDirs: cn.BinDirs, CacheDir: cn.CacheDir}, slog.New(slog.DiscardHandler))
	n.Read()
	rules := cn.Masquerade()
	if len(rules) != 4 || !strings.Contains(rules[0], "-A POSTROUTING -s "+cn.Subnet) {
		t.Fatalf("after the network was read its masquerade is:\n  %s\nwant the jump from POSTROUTING and the chain's three rules", strings.Join(rules, "\n  "))
	}
	pod := &corev1.Pod{}
	ask := func() {
		t.Helper()
		if _, _, err := n.ForPod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	ask()
	n.masqAt = time.Time{} // as if a check were due
	ask()
	if again := cn.Masquerade(); strings.Join(again, "\n") != strings.Join(rules, "\n") {
		t.Errorf("checked again, the masquerade is:\n  %s\nwant it as it was:\n  %s", strings.Join(again, "\n  "), strings.Join(rules, "\n  "))
	}

	if err := cn.FlushRules(); err != nil {
		t.Fatal(err)
	}
	ask() // within a minute of the last check: not checked
	if got := cn.Masquerade(); len(got) != 0 {
		t.Fatalf("the flush left %q", got)
	}
	n.masqAt = time.Now().Add(-masqueradeRecheck)
	ask()
	if again := cn.Masquerade(); strings.Join(again, "\n") != strings.Join(rules, "\n") {
		t.Errorf("a minute after a firewall reload, a pod's network found the masquerade:\n  %s\nwant it back:\n  %s", strings.Join(again, "\n  "), strings.Join(rules, "\n  "))
	}
}

// A masquerade that names no subnet breaks the network: its pods get an error naming
// the file and the key, and no plugin runs.
func TestBrokenMasqueradeNamesTheFileAndTheKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "10-n.conflist")
	if err := os.WriteFile(file, []byte(`{"cniVersion": "1.0.0", "name": "n", "io.staticpod.masquerade": "10.87.0.1", "plugins": [{"type": "bridge"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	n := New(Config{ConfDir: dir, BinDirs: []string{dir}}, slog.New(slog.DiscardHandler))
	_, _, err := n.ForPod(context.Background(), &corev1.Pod{})
	if want := "CNI configuration " + file + `: io.staticpod.masquerade: "10.87.0.1" is not an IPv4 subnet`; err == nil || err.Error() != want {
		t.Errorf("ForPod: %v, want %s", err, want)
	}
}
