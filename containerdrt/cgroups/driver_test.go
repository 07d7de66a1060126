package cgroups

import (
	"errors"
	"strings"
	"testing"
)

func TestChooseDriver(t *testing.T) {
	sd, fs := Systemd, Cgroupfs
	for _, tc := range []struct {
		asked, containerd Driver
		booted            bool
		want              Driver
		mismatch          bool
	}{
		{"", "", false, fs, false},
		{"", "", true, sd, false},
		{"", fs, true, fs, false},
		{"", sd, false, sd, false},
		{fs, "", true, fs, false},
		{sd, sd, true, sd, false},
		{fs, sd, true, "", true},
		{sd, fs, true, "", true},
	} {
		got, err := chooseDriver(tc.asked, tc.containerd, tc.booted)
		if got != tc.want || (err != nil) != tc.mismatch {
			t.Errorf("chooseDriver(%q, %q, %t) = %q, %v; want %q, mismatch %t", tc.asked, tc.containerd, tc.booted, got, err, tc.want, tc.mismatch)
		}
		if err != nil && (!errors.Is(err, ErrDriverMismatch) || !strings.Contains(err.Error(), "--cgroup-driver "+string(tc.containerd)) || !strings.Contains(err.Error(), "SystemdCgroup = ")) {
			t.Errorf("mismatch error %q: want an ErrDriverMismatch naming both fixes", err)
		}
	}
}

func TestConfigDriver(t *testing.T) {
	// As containerd 1.6's CRI Status reports its configuration (trimmed).
	const config = `{"containerd":{"snapshotter":"overlayfs","defaultRuntimeName":"runc",
		"runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2","options":{"BinaryName":"","SystemdCgroup":%s}},
		"kata":{"runtimeType":"io.containerd.kata.v2","options":{"SystemdCgroup":true}}}}}`
	for _, tc := range []struct {
		config string
		want   Driver
	}{
		{strings.Replace(config, "%s", "true", 1), Systemd},
		{strings.Replace(config, "%s", "false", 1), Cgroupfs},
		{`{"containerd":{"defaultRuntimeName":"runc","runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2"}}}}`, Cgroupfs},
		{`{"containerd":{"defaultRuntimeName":"kata","runtimes":{"kata":{"runtimeType":"io.containerd.kata.v2"}}}}`, ""},
		{"", ""},
	} {
		got, err := configDriver(tc.config)
		if err != nil || got != tc.want {
			t.Errorf("configDriver(%.60s...) = %q, %v; want %q", tc.config, got, err, tc.want)
		}
	}
	if _, err := configDriver("{"); err == nil {
		t.Error("configDriver of broken JSON: no error")
	}
}
