package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
)

// Mounts binds what the preparation named, and names only paths: none of them exists.
func TestMountsFromPrepared(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{})
	in.Container.VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "info", MountPath: "/etc/podinfo"},
		{Name: "own", MountPath: "/etc/resolv.conf/"},
	}
	in.Container.TerminationMessagePath = "/dev/termination-log"
	in.Container.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: new(true)}
	in.Prepared.Volumes = []Source{{Path: "/srv/data"}, {Path: "/pods/uid-1/volumes/info", ReadOnly: true}, {Path: "/srv/resolv"}}
	in.Prepared.TerminationLog = "/pods/uid-1/containers/app/0.termination-log"
	in.Prepared.Shm = "/pods/uid-1/shm"
	opts, err := Mounts(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range specFromOpts(t, "", opts).Mounts {
		if strings.HasPrefix(m.Source, "/") {
			got = append(got, m.Destination+" "+m.Source+" "+strings.Join(m.Options, ","))
		}
	}
	want := []string{
		"/data /srv/data rbind,rprivate,rw",
		"/etc/podinfo /pods/uid-1/volumes/info rbind,rprivate,ro",
		"/etc/resolv.conf/ /srv/resolv rbind,rprivate,rw", // the container's own, not the pod's
		"/etc/hosts /pods/uid-1/etc-hosts rbind,rprivate,rw",
		"/etc/hostname /pods/uid-1/hostname rbind,rprivate,ro",
		"/dev/termination-log /pods/uid-1/containers/app/0.termination-log rbind,rprivate,rw",
		"/dev/shm /pods/uid-1/shm rbind,rprivate,rw",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
}

// A container whose mounts were not prepared gets no spec rather than binds of nothing.
func TestMountsUnprepared(t *testing.T) {
	in := specTestInput(ocispec.ImageConfig{})
	in.Container.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if _, err := Mounts(in); err == nil || !strings.Contains(err.Error(), "0 of its 1 volumeMounts prepared") {
		t.Errorf("Mounts without prepared volumes = %v, want an error", err)
	}
	in = specTestInput(ocispec.ImageConfig{})
	in.Prepared.EtcHosts = ""
	if _, err := Mounts(in); err == nil || !strings.Contains(err.Error(), "mount /etc/hosts") {
		t.Errorf("Mounts without the pod's /etc/hosts = %v, want an error", err)
	}
}
