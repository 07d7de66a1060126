package runner

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner/events"
	"github.com/staticpod/staticpod/runner/restrict"
)

// sysctlPod is a pod from file a.yaml that sets sysctls (each to "1").
func sysctlPod(edit func(*corev1.Pod), names ...string) *corev1.Pod {
	p := restrictedPod("a", manifests.SourceFile, func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
		}
	})
	p.Annotations[manifests.AnnotationLocation] = "/m/a.yaml"
	if edit != nil {
		edit(p)
	}
	return p
}

// TestSysctlsAllowTheSafeAndTheAllowedOnly checks the kubelet's allow rules: the safe
// sysctls of the kernel, the names and prefixes of --allowed-unsafe-sysctls, names
// with slashes as with dots, and no sysctl of a namespace the pod shares with the host.
func TestSysctlsAllowTheSafeAndTheAllowedOnly(t *testing.T) {
	const kernel = "6.1.0"
	hostNet := func(p *corev1.Pod) { p.Spec.HostNetwork = true }
	hostIPC := func(p *corev1.Pod) { p.Spec.HostIPC = true }
	notListed := func(i, name string) string {
		return "spec.securityContext.sysctls[" + i + `]: forbidden sysctl: "` + name + `" not allowlisted (--allowed-unsafe-sysctls); pod default/a from file /m/a.yaml`
	}
	tests := []struct {
		name    string
		sysctls restrict.Sysctls
		pod     *corev1.Pod
		want    string // the message; "" when allowed
	}{
		{"no sysctls", restrict.Sysctls{}, sysctlPod(nil), ""},
		{"safe", restrict.Sysctls{Kernel: kernel}, sysctlPod(nil, "net.ipv4.ip_unprivileged_port_start", "kernel.shm_rmid_forced"), ""},
		{"safe, written with slashes", restrict.Sysctls{Kernel: kernel}, sysctlPod(nil, "net/ipv4/ip_unprivileged_port_start"), ""},
		{"unsafe", restrict.Sysctls{Kernel: kernel}, sysctlPod(nil, "net.ipv4.tcp_syncookies", "kernel.msgmax"), notListed("1", "kernel.msgmax")},
		{"unsafe, allowed by name", restrict.Sysctls{Kernel: kernel, AllowedUnsafe: []string{"kernel.msgmax"}}, sysctlPod(nil, "kernel.msgmax"), ""},
		{"unsafe, another name allowed", restrict.Sysctls{Kernel: kernel, AllowedUnsafe: []string{"kernel.msgmax"}}, sysctlPod(nil, "kernel.msgmnb"), notListed("0", "kernel.msgmnb")},
		{"unsafe, allowed by prefix", restrict.Sysctls{Kernel: kernel, AllowedUnsafe: []string{"net.core.*", "kernel.shm*"}}, sysctlPod(nil, "net.core.somaxconn", "kernel.shmmax"), ""},
		{"prefix of whole segments", restrict.Sysctls{Kernel: kernel, AllowedUnsafe: []string{"net.core.*"}}, sysctlPod(nil, "net.ipv6.conf.all.forwarding"), notListed("0", "net.ipv6.conf.all.forwarding")},
		{"prefix written with slashes", restrict.Sysctls{Kernel: kernel, AllowedUnsafe: []string{"net/ipv4/conf/*"}}, sysctlPod(nil, "net/ipv4/conf/eth0.100/rp_filter"), ""},
		{"safe from a later kernel", restrict.Sysctls{Kernel: "4.14.1"}, sysctlPod(nil, "net.ipv4.tcp_rmem"), notListed("0", "net.ipv4.tcp_rmem")},
		{"kernel unknown", restrict.Sysctls{}, sysctlPod(nil, "net.ipv4.tcp_keepalive_time"), notListed("0", "net.ipv4.tcp_keepalive_time")},
		{"safe net sysctl on the host network", restrict.Sysctls{Kernel: kernel}, sysctlPod(hostNet, "net.ipv4.tcp_syncookies"),
			`spec.securityContext.sysctls[0]: forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled; pod default/a from file /m/a.yaml`},
		{"IPC sysctl on the host network", restrict.Sysctls{Kernel: kernel}, sysctlPod(hostNet, "kernel.shm_rmid_forced"), ""},
		{"allowed IPC sysctl in the host's IPC", restrict.Sysctls{Kernel: kernel, AllowedUnsafe: []string{"fs.mqueue.*"}}, sysctlPod(hostIPC, "fs.mqueue.msg_max"),
			`spec.securityContext.sysctls[0]: forbidden sysctl: "fs.mqueue.msg_max" not allowed with host ipc enabled; pod default/a from file /m/a.yaml`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			f := restrict.Restrictions{Sysctls: tt.sysctls}.Check(tt.pod)
			if f != nil {
				got = f.Message(tt.pod)
			}
			if got != tt.want {
				t.Errorf("Check = %q, want %q", got, tt.want)
			}
			if rej := (Rejection{Pod: tt.pod, Forbidden: f}); f != nil && (rej.Reason() != restrict.ReasonSysctlForbidden || rej.Status().Phase != corev1.PodFailed) {
				t.Errorf("rejection: %s %s, want Failed %s", rej.Status().Phase, rej.Reason(), restrict.ReasonSysctlForbidden)
			}
		})
	}
}

// A pod that sets a sysctl neither safe nor allowed is not run: Failed with the
// kubelet's reason SysctlForbidden, and a warning event that names the sysctl and the
// file; a pod of allowed sysctls beside it runs.
func TestForbiddenSysctlFailsThePod(t *testing.T) {
	h := newHarness(t)
	h.r.opts.Restrictions = restrict.Restrictions{Sysctls: restrict.Sysctls{Kernel: "6.1.0", AllowedUnsafe: []string{"kernel.msg*"}}}
	l := newLoop(h.r, &sync.WaitGroup{})
	var spawned []*worker
	l.spawn = func(_ context.Context, w *worker) { spawned = append(spawned, w) }
	withSysctls := func(name string, sysctls ...string) *corev1.Pod {
		p := testPod(t, name, "httpd -f", corev1.RestartPolicyAlways)
		p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		for _, s := range sysctls {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: s, Value: "1"})
		}
		return p
	}
	forbidden := withSysctls("tuned", "kernel.shm_rmid_forced", "net.core.somaxconn")
	allowed := withSysctls("fine", "net.ipv4.ip_unprivileged_port_start", "kernel.msgmax")
	if _, err := h.r.pleg.Relist(h.ctx); err != nil {
		t.Fatal(err)
	}
	l.apply(h.ctx, manifests.Update{Source: manifests.SourceFile, Pods: []*corev1.Pod{forbidden, allowed}})
	if len(spawned) != 1 || spawned[0].uid != allowed.UID {
		t.Fatalf("%d workers, want one, for the pod whose sysctls are allowed", len(spawned))
	}
	var st corev1.PodStatus
	for _, p := range h.r.Pods() {
		if p.UID == forbidden.UID {
			st = p.Status
		}
	}
	want := `Pod was rejected: spec.securityContext.sysctls[1]: forbidden sysctl: "net.core.somaxconn" not allowlisted (--allowed-unsafe-sysctls); pod default/tuned-n from file tuned.yaml`
	if st.Phase != corev1.PodFailed || st.Reason != restrict.ReasonSysctlForbidden || st.Message != want {
		t.Errorf("status of the pod: %s %q %q; want Failed %q %q", st.Phase, st.Reason, st.Message, restrict.ReasonSysctlForbidden, want)
	}
	evs := h.r.events.Pod(forbidden.UID)
	if len(evs) != 1 || evs[0].Reason != restrict.ReasonSysctlForbidden || evs[0].Type != events.Warning || evs[0].Message != want {
		t.Errorf("events of the pod: %+v, want one warning %s: %s", evs, restrict.ReasonSysctlForbidden, want)
	}
}
