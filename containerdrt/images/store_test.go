package images

import (
	"errors"
	"testing"

	"github.com/staticpod/staticpod/runner"
)

const testDigestHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestNormalizeRef(t *testing.T) {
	for ref, want := range map[string]string{
		"busybox":                               "docker.io/library/busybox:latest",
		"me/app:1":                              "docker.io/me/app:1",
		"127.0.0.1:5000/app":                    "127.0.0.1:5000/app:latest",
		"registry.k8s.io/etcd:3.5.9-0":          "registry.k8s.io/etcd:3.5.9-0",
		"localhost/app@sha256:" + testDigestHex: "localhost/app@sha256:" + testDigestHex,
	} {
		if got, err := normalizeRef(ref); got != want || err != nil {
			t.Errorf("normalizeRef(%s) = %q, %v, want %q", ref, got, err, want)
		}
	}
	if _, err := normalizeRef("Bad:Ref:"); !errors.Is(err, runner.ErrImagePull) {
		t.Errorf("normalizeRef(Bad:Ref:) = %v, want ErrImagePull", err)
	}
}
