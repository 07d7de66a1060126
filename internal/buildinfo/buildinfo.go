// Package buildinfo is what a staticpod binary knows of its own build: the version,
// commit and commit date the linker sets (hack/build.sh, hack/release.sh), else those Go
// stamps from the checkout it was built in, and the Go toolchain, platform and
// containerd client compiled in. The date is the commit's, never the clock's, so that
// two builds of one commit are the same bytes.
//
// It imports nothing of staticpod's.
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set by the linker: go build -ldflags "-X github.com/staticpod/staticpod/internal/buildinfo.Version=v0.1.0".
var (
	// Version is `git describe` of the commit built, "dev" unless set.
	Version = "dev"
	// Commit is the full hash of the commit built.
	Commit = ""
	// Date is the commit's time, UTC, RFC 3339.
	Date = ""
)

// containerdModule is the containerd client's module, whose version Info reports.
const containerdModule = "github.com/containerd/containerd/v2"

// Info is a binary's build.
type Info struct {
	Version    string
	Commit     string // "unknown" when neither the linker nor Go's VCS stamp set it
	Date       string // likewise
	Go         string // go1.26.8
	Platform   string // linux/arm64, linux/arm/v7
	Containerd string // the containerd client's module version, "" when not linked
}

// Get returns this binary's build.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return read(bi, Version, Commit, Date)
}

// read is Get from a build's info and the linker's values.
func read(bi *debug.BuildInfo, version, commit, date string) Info {
	in := Info{Version: version, Commit: commit, Date: date, Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if in.Commit == "" {
				in.Commit = s.Value
			}
		case "vcs.time":
			if in.Date == "" {
				in.Date = s.Value
			}
		case "vcs.modified":
			modified = s.Value == "true"
		case "GOARM":
			if runtime.GOARCH == "arm" && s.Value != "" {
				in.Platform += "/v" + s.Value[:1] // 7, or 7,softfloat
			}
		}
	}
	if modified && commit == "" && in.Commit != "" {
		in.Commit += "-dirty"
	}
	for _, m := range bi.Deps {
		if m.Path == containerdModule {
			in.Containerd = m.Version
			if m.Replace != nil {
				in.Containerd = m.Replace.Version
			}
		}
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	if in.Date == "" {
		in.Date = "unknown"
	}
	return in
}

// Write prints the build as `staticpod version` shows it, one "key: value" line each
// after the first.
func (in Info) Write(w io.Writer) error {
	_, err := fmt.Fprintf(w, "staticpod %s\ncommit: %s\ndate: %s\ngo: %s\nplatform: %s\n",
		in.Version, in.Commit, in.Date, in.Go, in.Platform)
	if err == nil && in.Containerd != "" {
		_, err = fmt.Fprintf(w, "containerd client: %s\n", in.Containerd)
	}
	return err
}
