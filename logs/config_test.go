package logs

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// shimArgv builds the logger's argv from a binary:// URI whose query is query, as
// containerd does: cio.LogURIGenerator sets each entry on the URI's query, and the shim's
// process.NewBinaryCmd appends, for each key of the parsed query in map order, the key
// and its first value.
func shimArgv(t *testing.T, query map[string]string) []string {
	t.Helper()
	uri := &url.URL{Scheme: "binary", Path: "/usr/bin/staticpod"}
	q := uri.Query()
	for k, v := range query {
		q.Set(k, v)
	}
	uri.RawQuery = q.Encode()
	parsed, err := url.Parse(uri.String())
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for k, vs := range parsed.Query() {
		args = append(args, k)
		if len(vs) > 0 {
			args = append(args, vs[0])
		}
	}
	return args
}

func TestConfigSurvivesTheShimsArgv(t *testing.T) {
	configs := []Config{
		{Path: "/var/log/pods/default_web-node1_0123/nginx/0.log"},
		{
			Path:        "/var/log/pods/kube-system_etcd-n1_abc/etcd/3.log",
			Symlink:     "/var/log/containers/etcd-n1_kube-system_etcd-0123abcd.log",
			MaxSize:     4096,
			MaxFiles:    2,
			MaxLineSize: 100,
		},
		{Path: "/tmp/odd path/with&amp;=?#%/0.log", Symlink: "/tmp/a b/c+d.log", MaxSize: -1},
	}
	for _, cfg := range configs {
		for range 20 { // map order is random: any order must give the same argv
			args := shimArgv(t, cfg.Query())
			if len(args) != 2 || args[0] != Command {
				t.Fatalf("argv = %q, want [%s <config>]", args, Command)
			}
			got, err := ParseConfig(args[1])
			if err != nil {
				t.Fatalf("ParseConfig(%q): %v", args[1], err)
			}
			if diff := cmp.Diff(cfg, got); diff != "" {
				t.Fatalf("config after the shim's argv (-want +got):\n%s", diff)
			}
		}
	}
}

func TestParseConfigRejects(t *testing.T) {
	tests := []struct{ encoded, want string }{
		{"", "no log path"},
		{"path=/x&colour=red", "colour: unknown key"},
		{"path=/x&path=/y", "path given 2 times"},
		{"path=/x&max-size=ten", "max-size"},
		{"path=/x&max-files=1", "at least 2"},
		{"path=/x&max-line-size=-1", "must not be negative"},
		{"path=%zz", "invalid URL escape"},
	}
	for _, tt := range tests {
		_, err := ParseConfig(tt.encoded)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseConfig(%q) = %v, want an error with %q", tt.encoded, err, tt.want)
		}
	}
}

func TestPaths(t *testing.T) {
	tests := []struct{ got, want string }{
		{PodDir("/var/log/pods", "kube-system", "etcd-n1", "u1"), "/var/log/pods/kube-system_etcd-n1_u1"},
		{ContainerPath("/var/log/pods", "kube-system", "etcd-n1", "u1", "etcd", 3), "/var/log/pods/kube-system_etcd-n1_u1/etcd/3.log"},
		{PodDir("/var/log/pods", "ns", "p", "a/../../../etc"), "/var/log/pods/ns_p_a%2F..%2F..%2F..%2Fetc"},
		{PodDir("/var/log/pods", "ns", "p", "a%2Fb\x00"), "/var/log/pods/ns_p_a%252Fb%00"},
		{SymlinkPath("/var/log/containers", "etcd-n1", "kube-system", "etcd", "abc123"), "/var/log/containers/etcd-n1_kube-system_etcd-abc123.log"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("path = %s, want %s", tt.got, tt.want)
		}
	}
	long := SymlinkPath("/c", strings.Repeat("p", 200), "ns", "c", strings.Repeat("f", 64))
	if base := filepath.Base(long); len(base) != maxFileNameLen || !strings.HasSuffix(base, ".log") {
		t.Errorf("long symlink name has %d bytes (%s), want %d ending in .log", len(base), base, maxFileNameLen)
	}
}

func TestRemoveDeletesRotatedFilesAndSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c", "0.log")
	link := filepath.Join(dir, "containers", "p_ns_c-id.log")
	w := mustOpen(t, Config{Path: path, Symlink: link, MaxSize: 10, MaxFiles: 3}, steppingClock(time.Second))
	mustCopy(t, w, Stdout, "one\ntwo\nthree\n")
	other := filepath.Join(dir, "c", "1.log") // another attempt's log stays
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path, link); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path, link); err != nil {
		t.Errorf("second Remove: %v, want nil for files already gone", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "c"))
	if len(entries) != 1 || entries[0].Name() != "1.log" {
		t.Errorf("left in the container's directory: %v, want only 1.log", entries)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("symlink still there: %v", err)
	}
}
