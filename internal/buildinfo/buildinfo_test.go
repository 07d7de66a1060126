package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadTakesTheLinkersValuesElseGosVCSStamp(t *testing.T) {
	stamped := &debug.BuildInfo{
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "aaaa"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
		},
		Deps: []*debug.Module{{Path: "github.com/containerd/containerd/v2", Version: "v2.4.2"}},
	}
	for _, tc := range []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, commit, date string
		want                  Info
	}{
		{"linker", stamped, "v1.0.0", "bbbb", "2026-05-06T07:08:09Z",
			Info{Version: "v1.0.0", Commit: "bbbb", Date: "2026-05-06T07:08:09Z", Containerd: "v2.4.2"}},
		{"vcs stamp of a modified checkout", stamped, "dev", "", "",
			Info{Version: "dev", Commit: "aaaa-dirty", Date: "2026-01-02T03:04:05Z", Containerd: "v2.4.2"}},
		{"neither", nil, "dev", "", "",
			Info{Version: "dev", Commit: "unknown", Date: "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Go, tc.want.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
			if got := read(tc.bi, tc.version, tc.commit, tc.date); got != tc.want {
				t.Errorf("read = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestWritePrintsEveryFieldOnALineOfItsOwn(t *testing.T) {
	var b strings.Builder
	in := Info{Version: "v1.0.0", Commit: "bbbb", Date: "2026-05-06T07:08:09Z", Go: "go1.26.8", Platform: "linux/arm/v7", Containerd: "v2.4.2"}
	if err := in.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := "staticpod v1.0.0\ncommit: bbbb\ndate: 2026-05-06T07:08:09Z\ngo: go1.26.8\nplatform: linux/arm/v7\ncontainerd client: v2.4.2\n"
	if b.String() != want {
		t.Errorf("Write printed\n%s\nwant\n%s", b.String(), want)
	}
}
