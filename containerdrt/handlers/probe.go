package handlers

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// baselineOCIVersion is the version every OCI runtime takes: the one a runtime that
// cannot tell its own (crun before 1.9 has no `features`) is given.
const baselineOCIVersion = "1.0.2"

// probeTimeout bounds a runtime binary's `features`.
const probeTimeout = 5 * time.Second

// Probe settles the OCIVersion of the runc shim's handlers that run another binary
// than runc: the ociVersionMax its `features` command reports (OCI runtime spec 1.1),
// or the 1.0 baseline when it has no such command, wherever that is older than the
// version containerd's client writes. runc itself, the default, is left alone.
func (s Set) Probe(ctx context.Context) {
	for name, h := range s {
		if h.Type != RuncType || h.Options == nil || h.Options.BinaryName == "" || isRunc(h.Options.BinaryName) {
			continue
		}
		h.OCIVersion = olderThanSpec(ociVersionMax(ctx, h.Options.BinaryName))
		s[name] = h
	}
}

func isRunc(binary string) bool {
	base := binary[strings.LastIndex(binary, "/")+1:]
	return base == "runc"
}

// ociVersionMax asks binary for the newest spec version it takes.
func ociVersionMax(ctx context.Context, binary string) string {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "features").Output()
	if err != nil {
		return baselineOCIVersion
	}
	var f struct {
		Max string `json:"ociVersionMax"`
	}
	if json.Unmarshal(out, &f) != nil || f.Max == "" {
		return baselineOCIVersion
	}
	return f.Max
}

// olderThanSpec is v where it is older than the spec version containerd's client
// writes, else "" (the client's stands).
func olderThanSpec(v string) string {
	if compareVersions(v, specs.Version) < 0 {
		return v
	}
	return ""
}

// compareVersions compares the major.minor.patch of two spec versions, suffixes
// ("-dev", "+dev") ignored.
func compareVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func versionParts(v string) [3]int {
	var out [3]int
	v, _, _ = strings.Cut(v, "-")
	v, _, _ = strings.Cut(v, "+")
	for i, p := range strings.SplitN(v, ".", 3) {
		out[i], _ = strconv.Atoi(p)
	}
	return out
}
