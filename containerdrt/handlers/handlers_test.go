package handlers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

func TestParseReadsBinariesAndRuntimeTypes(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "crun")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag    string
		want    Handler
		wantErr string
	}{
		{flag: "crun=" + bin, want: Handler{Name: "crun", Type: RuncType, Options: &options.Options{BinaryName: bin}, Source: FromFlag}},
		{flag: "kata=io.containerd.kata.v2", want: Handler{Name: "kata", Type: "io.containerd.kata.v2", Source: FromFlag}},
		{flag: "runsc=io.containerd.runsc.v1", want: Handler{Name: "runsc", Type: "io.containerd.runsc.v1", Source: FromFlag}},
		{flag: "crun", wantErr: `want NAME=VALUE`},
		{flag: "Crun=" + bin, wantErr: `the name "Crun" is not a RuntimeClass handler`},
		{flag: "crun=crun", wantErr: `"crun" is neither an absolute path to an OCI runtime binary nor a containerd runtime type`},
		{flag: "crun=/nonexistent/crun", wantErr: `stat /nonexistent/crun: no such file or directory`},
		{flag: "crun=" + filepath.Dir(bin), wantErr: `is not an executable file`},
	} {
		h, err := Parse(tc.flag)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q) error = %v, want one with %q", tc.flag, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.flag, err)
			continue
		}
		if diff := cmp.Diff(tc.want, h, protocmp.Transform()); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.flag, diff)
		}
	}
}

// The testdata are the CRI Status configurations of containerd 1.6.20 and 2.4.2 given
// a crun runtime: [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun] in
// 1.6's config.toml (version 2), [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.crun]
// in 2.4's (version 3), each with options.BinaryName = "/usr/bin/crun".
func TestFromCRIReadsTheRuntimesOfContainerd16And24(t *testing.T) {
	want := Set{
		"crun": {Name: "crun", Type: RuncType, Options: &options.Options{BinaryName: "/usr/bin/crun"}, Source: FromContainerd},
		"runc": {Name: "runc", Type: RuncType, Options: &options.Options{}, Source: FromContainerd},
	}
	for _, file := range []string{"cri-status-config-1.6.json", "cri-status-config-2.4.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromCRI(string(data))
		if err != nil {
			t.Fatalf("FromCRI(%s): %v", file, err)
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("FromCRI(%s) (-want +got):\n%s", file, diff)
		}
	}
}

func TestNewLetsFlagsWinAndKeepsRunc(t *testing.T) {
	fromContainerd := Set{"kata": {Name: "kata", Type: "io.containerd.kata.v2", Source: FromContainerd}}
	s, err := New(fromContainerd, []string{"kata=io.containerd.kata-qemu.v2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); !cmp.Equal(got, []string{"kata", "runc"}) {
		t.Errorf("Names = %v, want [kata runc]", got)
	}
	if h, _ := s.Lookup("kata"); h.Type != "io.containerd.kata-qemu.v2" || h.Source != FromFlag {
		t.Errorf("kata = %+v, want the flag's", h)
	}
	if _, err := New(nil, []string{"bad"}); err == nil {
		t.Error("New with a bad flag: no error")
	}
}

func TestOptsKeepTheCgroupDriversSystemdCgroup(t *testing.T) {
	h := Handler{Name: "crun", Type: RuncType, Options: &options.Options{BinaryName: "/usr/bin/crun"}}
	if got := len(h.Opts(true)); got != 1 {
		t.Fatalf("Opts = %d options, want 1", got)
	}
	if h.Options.SystemdCgroup {
		t.Error("Opts changed the handler's own options")
	}
}

// A binary that answers `features` declares its ociVersionMax; one that has no such
// command (crun before 1.9) gets the 1.0 baseline; runc is left alone.
func TestProbeSettlesTheSpecVersionABinaryTakes(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s := Set{
		"old":      {Type: RuncType, Options: &options.Options{BinaryName: script("old", "exit 1")}},
		"features": {Type: RuncType, Options: &options.Options{BinaryName: script("features", `echo '{"ociVersionMin":"1.0.0","ociVersionMax":"1.1.0+dev"}'`)}},
		"new":      {Type: RuncType, Options: &options.Options{BinaryName: script("new", `echo '{"ociVersionMax":"9.0.0"}'`)}},
		"runc":     {Type: RuncType, Options: &options.Options{BinaryName: script("runc", "exit 1")}},
		"kata":     {Type: "io.containerd.kata.v2"},
	}
	s.Probe(t.Context())
	want := map[string]string{"old": "1.0.2", "features": "1.1.0+dev", "new": "", "runc": "", "kata": ""}
	for name, v := range want {
		if got := s[name].OCIVersion; got != v {
			t.Errorf("%s: OCIVersion = %q, want %q", name, got, v)
		}
	}
}
