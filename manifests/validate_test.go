package manifests

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Short names for the error types the tables expect.
const (
	tRequired     = field.ErrorTypeRequired
	tInvalid      = field.ErrorTypeInvalid
	tNotSupported = field.ErrorTypeNotSupported
	tForbidden    = field.ErrorTypeForbidden
	tDuplicate    = field.ErrorTypeDuplicate
	tNotFound     = field.ErrorTypeNotFound
	tTooLong      = field.ErrorTypeTooLong
)

// fieldErr is what the tables assert of an error: its type and the field it points at.
type fieldErr struct {
	Type  field.ErrorType
	Field string
}

// validateCase mutates a valid pod and lists every error Validate must then report.
type validateCase struct {
	name   string
	mutate func(*corev1.Pod)
	want   []fieldErr
}

// runValidateCases runs each case on a fresh pod from base. Order does not matter: both
// lists are sorted before they are compared.
func runValidateCases(t *testing.T, base func() *corev1.Pod, cases []validateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := base()
			tc.mutate(pod)
			errs := Validate(pod)
			if diff := gocmp.Diff(sortErrs(tc.want), fieldErrs(errs)); diff != "" {
				t.Errorf("Validate(%s) mismatch (-want +got):\n%s\nerrors: %v", tc.name, diff, errs.ToAggregate())
			}
		})
	}
}

func fieldErrs(errs field.ErrorList) []fieldErr {
	var got []fieldErr
	for _, e := range errs {
		got = append(got, fieldErr{e.Type, e.Field})
	}
	return sortErrs(got)
}

func sortErrs(errs []fieldErr) []fieldErr {
	return slices.SortedFunc(slices.Values(errs), func(a, b fieldErr) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(string(a.Type), string(b.Type)))
	})
}

// validPod is a small pod as Default leaves it, written out here so that these tests do
// not depend on Default.
func validPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers:                    []corev1.Container{validContainer("app")},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: new(int64(30)),
			DNSPolicy:                     corev1.DNSClusterFirst,
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			EnableServiceLinks:            new(true),
		},
	}
}

func validContainer(name string) corev1.Container {
	return corev1.Container{
		Name:                     name,
		Image:                    "registry.example/app:1.0",
		Ports:                    []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy:          corev1.PullIfNotPresent,
	}
}

// etcdPod is etcd as kubeadm writes it to /etc/kubernetes/manifests, defaulted.
func etcdPod() *corev1.Pod {
	probe := func(path string, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Host: "127.0.0.1", Path: path, Port: intstr.FromInt32(2381), Scheme: corev1.URISchemeHTTP,
			}},
			InitialDelaySeconds: 10, TimeoutSeconds: 15, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: failures,
		}
	}
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: path, Type: new(corev1.HostPathDirectoryOrCreate),
		}}}
	}
	pod := validPod()
	pod.ObjectMeta = metav1.ObjectMeta{
		Name: "etcd", Namespace: "kube-system",
		Labels:      map[string]string{"component": "etcd", "tier": "control-plane"},
		Annotations: map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": "https://10.0.0.10:2379"},
	}
	pod.Spec.HostNetwork = true
	pod.Spec.PriorityClassName = "system-node-critical"
	pod.Spec.Priority = new(int32(2000001000))
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	pod.Spec.Volumes = []corev1.Volume{hostPath("etcd-certs", "/etc/kubernetes/pki/etcd"), hostPath("etcd-data", "/var/lib/etcd")}
	pod.Spec.Containers = []corev1.Container{{
		Name:    "etcd",
		Image:   "registry.k8s.io/etcd:3.5.15-0",
		Command: []string{"etcd", "--data-dir=/var/lib/etcd", "--listen-metrics-urls=http://127.0.0.1:2381"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi"),
		}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "etcd-data", MountPath: "/var/lib/etcd"},
			{Name: "etcd-certs", MountPath: "/etc/kubernetes/pki/etcd"},
		},
		LivenessProbe:            probe("/livez", 8),
		ReadinessProbe:           probe("/readyz", 3),
		StartupProbe:             probe("/readyz", 24),
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy:          corev1.PullIfNotPresent,
	}}
	return pod
}

func ctr(pod *corev1.Pod) *corev1.Container { return &pod.Spec.Containers[0] }

func errAt(t field.ErrorType, path string) fieldErr { return fieldErr{t, path} }

func TestValidateAcceptsValidPods(t *testing.T) {
	runValidateCases(t, etcdPod, []validateCase{
		{"kubeadm etcd", func(*corev1.Pod) {}, nil},
	})
	runValidateCases(t, validPod, []validateCase{
		{"minimal", func(*corev1.Pod) {}, nil},
		{"scheduling fields are accepted", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone"}}
			p.Spec.Priority = new(int32(-5))
		}, nil},
		{"sidecar with probes and an init container", func(p *corev1.Pod) {
			sidecar := validContainer("proxy")
			sidecar.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
			sidecar.Ports = []corev1.ContainerPort{{Name: "admin", ContainerPort: 9901, Protocol: corev1.ProtocolTCP}}
			sidecar.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("admin")}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 3, FailureThreshold: 3}
			setup := validContainer("setup")
			setup.Ports = nil
			p.Spec.InitContainers = []corev1.Container{setup, sidecar}
		}, nil},
		{"downward API, hooks and an env var of every allowed kind", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
				DefaultMode: new(int32(0o644)),
				Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}},
					{Path: "mem/limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
				},
			}}})
			c := ctr(p)
			c.Env = []corev1.EnvVar{
				{Name: "MODE", Value: "prod"},
				{Name: "my.relaxed-name", Value: "x"},
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
				{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['app']"}}},
				{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
			}
			c.Lifecycle = &corev1.Lifecycle{
				PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/start", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTPS}},
				PreStop:   &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}},
			}
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
		}, nil},
		{"host namespaces, DNS and security settings", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			ctr(p).Ports[0].HostPort = 8080
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.2"}, Searches: []string{"example.com.", "_srv.example.com", "."}}
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.3", Hostnames: []string{"registry.local"}}}
			p.Spec.ServiceAccountName = "default"
			p.Spec.AutomountServiceAccountToken = new(false)
			p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: new(int64(1000)), FSGroup: new(int64(2000))}
			ctr(p).Lifecycle = &corev1.Lifecycle{StopSignal: new(corev1.SIGRTMINPLUS3)}
			ctr(p).SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: new(false), ReadOnlyRootFilesystem: new(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}}}
		}, nil},
		{"hostPath types, memory emptyDir, huge pages and extended resources", func(p *corev1.Pod) {
			for i, typ := range hostPathTypes {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "host" + string(rune('a'+i)),
					VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/x", Type: new(typ)}}})
			}
			p.Spec.Volumes[0].EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: new(resource.MustParse("64Mi"))}
			ctr(p).Resources = corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"memory": resource.MustParse("1Gi"), "hugepages-2Mi": resource.MustParse("4Mi"), "example.com/gpu": resource.MustParse("1")},
				Requests: corev1.ResourceList{"memory": resource.MustParse("512Mi"), "hugepages-2Mi": resource.MustParse("4Mi"), "example.com/gpu": resource.MustParse("1"),
					"cpu": resource.MustParse("250m"), "ephemeral-storage": resource.MustParse("1Gi")},
			}
		}, nil},
	})
}

func TestValidateMetadata(t *testing.T) {
	runValidateCases(t, validPod, []validateCase{
		{"no name", func(p *corev1.Pod) { p.Name = "" }, []fieldErr{errAt(tRequired, "metadata.name")}},
		{"generateName", func(p *corev1.Pod) { p.Name, p.GenerateName = "", "web-" }, []fieldErr{errAt(tRequired, "metadata.name")}},
		{"name not a DNS subdomain", func(p *corev1.Pod) { p.Name = "Web_1" }, []fieldErr{errAt(tInvalid, "metadata.name")}},
		{"no namespace", func(p *corev1.Pod) { p.Namespace = "" }, []fieldErr{errAt(tRequired, "metadata.namespace")}},
		{"namespace not a DNS label", func(p *corev1.Pod) { p.Namespace = "kube.system" }, []fieldErr{errAt(tInvalid, "metadata.namespace")}},
		{"bad label key and value", func(p *corev1.Pod) { p.Labels = map[string]string{"a b": "ok", "k": "-bad-"} }, []fieldErr{
			errAt(tInvalid, "metadata.labels"), errAt(tInvalid, "metadata.labels"),
		}},
		{"bad annotation key", func(p *corev1.Pod) { p.Annotations = map[string]string{"example.com/a/b": "x"} }, []fieldErr{errAt(tInvalid, "metadata.annotations")}},
		{"progress deadline in seconds", func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationProgressDeadline: "30"} }, nil},
		{"progress deadline not whole seconds", func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationProgressDeadline: "30s"} }, []fieldErr{errAt(tInvalid, "metadata.annotations[staticpod.io/progress-deadline-seconds]")}},
		{"progress deadline 0", func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationProgressDeadline: "0"} }, []fieldErr{errAt(tInvalid, "metadata.annotations[staticpod.io/progress-deadline-seconds]")}},
		{"uid a UUID", func(p *corev1.Pod) { p.UID = "3f5b3a0e-8a3c-4f57-9d7e-2b8e0c1d9a11" }, nil},
		{"uid climbing out of the pods dir", func(p *corev1.Pod) { p.UID = "aaaaaaaa/../../../../../etc" }, []fieldErr{errAt(tInvalid, "metadata.uid")}},
		{"uid a glob", func(p *corev1.Pod) { p.UID = "*" }, []fieldErr{errAt(tInvalid, "metadata.uid")}},
		{"uid too long", func(p *corev1.Pod) { p.UID = types.UID(strings.Repeat("a", MaxUIDLength+1)) }, []fieldErr{errAt(tTooLong, "metadata.uid")}},
	})
}

func TestValidatePodSpec(t *testing.T) {
	runValidateCases(t, validPod, []validateCase{
		{"no restartPolicy", func(p *corev1.Pod) { p.Spec.RestartPolicy = "" }, []fieldErr{errAt(tRequired, "spec.restartPolicy")}},
		{"unknown restartPolicy", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, []fieldErr{errAt(tNotSupported, "spec.restartPolicy")}},
		{"unknown dnsPolicy", func(p *corev1.Pod) { p.Spec.DNSPolicy = "Host" }, []fieldErr{errAt(tNotSupported, "spec.dnsPolicy")}},
		{"dnsPolicy None without dnsConfig", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }, []fieldErr{errAt(tRequired, "spec.dnsConfig")}},
		{"dnsPolicy None without nameservers", func(p *corev1.Pod) {
			p.Spec.DNSPolicy, p.Spec.DNSConfig = corev1.DNSNone, &corev1.PodDNSConfig{Searches: []string{"example.com"}}
		}, []fieldErr{errAt(tRequired, "spec.dnsConfig.nameservers")}},
		{"dnsConfig limits", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{
				Nameservers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "not-an-ip"},
				Searches:    slices.Repeat([]string{"a.example"}, 33),
				Options:     []corev1.PodDNSConfigOption{{Value: new("2")}},
			}
		}, []fieldErr{
			errAt(tInvalid, "spec.dnsConfig.nameservers"), errAt(tInvalid, "spec.dnsConfig.nameservers[3]"),
			errAt(tInvalid, "spec.dnsConfig.searches"), errAt(tRequired, "spec.dnsConfig.options[0]"),
		}},
		{"bad search domain", func(p *corev1.Pod) { p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"-bad.example"}} },
			[]fieldErr{errAt(tInvalid, "spec.dnsConfig.searches[0]")}},
		{"no terminationGracePeriodSeconds", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil },
			[]fieldErr{errAt(tRequired, "spec.terminationGracePeriodSeconds")}},
		{"negative terminationGracePeriodSeconds", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = new(int64(-1)) },
			[]fieldErr{errAt(tInvalid, "spec.terminationGracePeriodSeconds")}},
		{"zero activeDeadlineSeconds", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = new(int64(0)) },
			[]fieldErr{errAt(tInvalid, "spec.activeDeadlineSeconds")}},
		{"hostAliases", func(p *corev1.Pod) {
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.300", Hostnames: []string{"ok.example", "Not OK"}}}
		}, []fieldErr{errAt(tInvalid, "spec.hostAliases[0].ip"), errAt(tInvalid, "spec.hostAliases[0].hostnames[1]")}},
		{"hostname and subdomain", func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web.1", "Sub" },
			[]fieldErr{errAt(tInvalid, "spec.hostname"), errAt(tInvalid, "spec.subdomain")}},
		{"hostnameOverride with hostNetwork", func(p *corev1.Pod) {
			p.Spec.HostNetwork, p.Spec.HostnameOverride = true, new(strings.Repeat("a", 65))
			ctr(p).Ports = nil
		}, []fieldErr{errAt(tTooLong, "spec.hostnameOverride"), errAt(tForbidden, "spec.hostnameOverride")}},
		{"priorityClassName", func(p *corev1.Pod) { p.Spec.PriorityClassName = "System_Critical" },
			[]fieldErr{errAt(tInvalid, "spec.priorityClassName")}},
		{"preemptionPolicy", func(p *corev1.Pod) { p.Spec.PreemptionPolicy = new(corev1.PreemptionPolicy("Always")) },
			[]fieldErr{errAt(tNotSupported, "spec.preemptionPolicy")}},
		{"os", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: "plan9"} }, []fieldErr{errAt(tNotSupported, "spec.os.name")}},
		{"nodeName", func(p *corev1.Pod) { p.Spec.NodeName = "Node_1" }, []fieldErr{errAt(tInvalid, "spec.nodeName")}},
		{"pod-level resources", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{"ephemeral-storage": resource.MustParse("1Gi")}}
		}, []fieldErr{errAt(tNotSupported, "spec.resources.limits[ephemeral-storage]")}},
	})
}

func TestValidatePodSecurity(t *testing.T) {
	runValidateCases(t, validPod, []validateCase{
		{"shareProcessNamespace with hostPID", func(p *corev1.Pod) { p.Spec.HostPID, p.Spec.ShareProcessNamespace = true, new(true) },
			[]fieldErr{errAt(tInvalid, "spec.shareProcessNamespace")}},
		{"user namespace with host namespaces", func(p *corev1.Pod) {
			p.Spec.HostUsers, p.Spec.HostPID, p.Spec.HostIPC = new(false), true, true
		}, []fieldErr{errAt(tForbidden, "spec.hostPID"), errAt(tForbidden, "spec.hostIPC")}},
		{"user namespace with volumes staticpod cannot map", func(p *corev1.Pod) {
			p.Spec.HostUsers = new(false)
			p.Spec.Volumes = append(p.Spec.Volumes,
				corev1.Volume{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv"}}},
				corev1.Volume{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "busybox:1.36", PullPolicy: corev1.PullIfNotPresent}}})
		}, []fieldErr{errAt(tForbidden, "spec.volumes[2].hostPath"), errAt(tForbidden, "spec.volumes[3].image")}},
		{"IDs out of range", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: new(int64(-1)), RunAsGroup: new(int64(-1)),
				FSGroup: new(int64(1 << 40)), SupplementalGroups: []int64{10, -3}}
		}, []fieldErr{
			errAt(tInvalid, "spec.securityContext.runAsUser"), errAt(tInvalid, "spec.securityContext.runAsGroup"),
			errAt(tInvalid, "spec.securityContext.fsGroup"), errAt(tInvalid, "spec.securityContext.supplementalGroups[1]"),
		}},
		{"sysctls", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			ctr(p).Ports = nil
			p.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_forward"}, {Name: "Kernel.Bad"}, {Name: ""}, {Name: "kernel.msgmax"}, {Name: "kernel.msgmax"}}
		}, []fieldErr{
			errAt(tInvalid, "spec.securityContext.sysctls[0].name"), errAt(tInvalid, "spec.securityContext.sysctls[1].name"),
			errAt(tRequired, "spec.securityContext.sysctls[2].name"), errAt(tDuplicate, "spec.securityContext.sysctls[4].name"),
		}},
		{"seccomp Localhost without profile", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}
		}, []fieldErr{errAt(tRequired, "spec.securityContext.seccompProfile.localhostProfile")}},
		{"seccomp profile for RuntimeDefault", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault, LocalhostProfile: new("x.json")}
		}, []fieldErr{errAt(tInvalid, "spec.securityContext.seccompProfile.localhostProfile")}},
		{"seccomp unknown type", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: "Strict"}
		}, []fieldErr{errAt(tNotSupported, "spec.securityContext.seccompProfile.type")}},
		{"policies", func(p *corev1.Pod) {
			sc := p.Spec.SecurityContext
			sc.FSGroupChangePolicy = new(corev1.PodFSGroupChangePolicy("Never"))
			sc.SupplementalGroupsPolicy = new(corev1.SupplementalGroupsPolicy("Union"))
			sc.SELinuxChangePolicy = new(corev1.PodSELinuxChangePolicy("Relabel"))
			sc.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost}
		}, []fieldErr{
			errAt(tNotSupported, "spec.securityContext.fsGroupChangePolicy"), errAt(tNotSupported, "spec.securityContext.supplementalGroupsPolicy"),
			errAt(tNotSupported, "spec.securityContext.seLinuxChangePolicy"), errAt(tRequired, "spec.securityContext.appArmorProfile.localhostProfile"),
		}},
		{"selinux level containerd refuses", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t", Level: "level0"}
		}, []fieldErr{errAt(tInvalid, "spec.securityContext.seLinuxOptions.level")}},
	})
}

func TestValidateVolumes(t *testing.T) {
	vol := func(p *corev1.Pod) *corev1.VolumeSource { return &p.Spec.Volumes[0].VolumeSource }
	downward := func(items ...corev1.DownwardAPIVolumeFile) corev1.VolumeSource {
		return corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}
	}
	labels := &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}
	runValidateCases(t, validPod, []validateCase{
		{"no source", func(p *corev1.Pod) { *vol(p) = corev1.VolumeSource{} }, []fieldErr{errAt(tRequired, "spec.volumes[0]")}},
		{"two sources", func(p *corev1.Pod) { vol(p).HostPath = &corev1.HostPathVolumeSource{Path: "/srv"} },
			[]fieldErr{errAt(tForbidden, "spec.volumes[0].emptyDir")}},
		{"bad and duplicate names", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0], corev1.Volume{Name: "Data", VolumeSource: *vol(p)})
		}, []fieldErr{errAt(tDuplicate, "spec.volumes[1].name"), errAt(tInvalid, "spec.volumes[2].name")}},
		{"hostPath without path", func(p *corev1.Pod) { *vol(p) = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}} },
			[]fieldErr{errAt(tRequired, "spec.volumes[0].hostPath.path")}},
		{"hostPath relative", func(p *corev1.Pod) {
			*vol(p) = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "srv"}}
		},
			[]fieldErr{errAt(tInvalid, "spec.volumes[0].hostPath.path")}},
		{"hostPath with backsteps and bad type", func(p *corev1.Pod) {
			*vol(p) = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/../etc", Type: new(corev1.HostPathType("Dir"))}}
		}, []fieldErr{errAt(tInvalid, "spec.volumes[0].hostPath.path"), errAt(tNotSupported, "spec.volumes[0].hostPath.type")}},
		{"image volume with a subPath", func(p *corev1.Pod) {
			*vol(p) = corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data:1", PullPolicy: corev1.PullIfNotPresent}}
			ctr(p).VolumeMounts[0].SubPath = "models"
		}, nil},
		{"image volume without reference", func(p *corev1.Pod) {
			*vol(p) = corev1.VolumeSource{Image: &corev1.ImageVolumeSource{PullPolicy: corev1.PullNever}}
		}, []fieldErr{errAt(tRequired, "spec.volumes[0].image.reference")}},
		{"image volume with spaces and an unknown pull policy", func(p *corev1.Pod) {
			*vol(p) = corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: " registry.example/data:1", PullPolicy: "Sometimes"}}
		}, []fieldErr{errAt(tInvalid, "spec.volumes[0].image.reference"), errAt(tNotSupported, "spec.volumes[0].image.pullPolicy")}},
		{"emptyDir medium and size", func(p *corev1.Pod) {
			*vol(p) = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "Disk", SizeLimit: new(resource.MustParse("-1Mi"))}}
		}, []fieldErr{errAt(tNotSupported, "spec.volumes[0].emptyDir.medium"), errAt(tInvalid, "spec.volumes[0].emptyDir.sizeLimit")}},
		{"downwardAPI paths and modes", func(p *corev1.Pod) {
			*vol(p) = downward(
				corev1.DownwardAPIVolumeFile{Path: "/abs", FieldRef: labels},
				corev1.DownwardAPIVolumeFile{Path: "a/../../b", FieldRef: labels, Mode: new(int32(0o1000))},
				corev1.DownwardAPIVolumeFile{Path: "..data", FieldRef: labels},
				corev1.DownwardAPIVolumeFile{Path: "..data", FieldRef: labels},
				corev1.DownwardAPIVolumeFile{FieldRef: labels},
			)
			vol(p).DownwardAPI.DefaultMode = new(int32(-1))
		}, []fieldErr{
			errAt(tInvalid, "spec.volumes[0].downwardAPI.defaultMode"),
			errAt(tInvalid, "spec.volumes[0].downwardAPI.items[0].path"),
			errAt(tInvalid, "spec.volumes[0].downwardAPI.items[1].path"), errAt(tInvalid, "spec.volumes[0].downwardAPI.items[1].mode"),
			errAt(tInvalid, "spec.volumes[0].downwardAPI.items[2].path"),
			errAt(tInvalid, "spec.volumes[0].downwardAPI.items[3].path"), errAt(tDuplicate, "spec.volumes[0].downwardAPI.items[3].path"),
			errAt(tRequired, "spec.volumes[0].downwardAPI.items[4].path"),
		}},
		{"downwardAPI sources", func(p *corev1.Pod) {
			*vol(p) = downward(
				corev1.DownwardAPIVolumeFile{Path: "a", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}},
				corev1.DownwardAPIVolumeFile{Path: "b", ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}},
				corev1.DownwardAPIVolumeFile{Path: "c"},
				corev1.DownwardAPIVolumeFile{Path: "d", FieldRef: labels, ResourceFieldRef: &corev1.ResourceFieldSelector{}},
				corev1.DownwardAPIVolumeFile{Path: "e", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['Bad Key']"}},
			)
		}, []fieldErr{
			errAt(tNotSupported, "spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath"),
			errAt(tRequired, "spec.volumes[0].downwardAPI.items[1].resourceFieldRef.containerName"),
			errAt(tRequired, "spec.volumes[0].downwardAPI.items[2]"),
			errAt(tInvalid, "spec.volumes[0].downwardAPI.items[3]"),
			errAt(tInvalid, "spec.volumes[0].downwardAPI.items[4].fieldRef.fieldPath"),
		}},
	})
}

// TestValidateReportsEveryProblem checks that one broken pod yields all of its errors,
// from metadata to the static-pod rules, and how they read.
func TestValidateReportsEveryProblem(t *testing.T) {
	pod := validPod()
	pod.Name = ""
	pod.Spec.RestartPolicy = "Sometimes"
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "claim", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
	}})
	c := ctr(pod)
	c.Image = ""
	c.Ports[0].ContainerPort = 70000
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "certs", MountPath: "/certs"})
	c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{}}}
	pod.Spec.InitContainers = []corev1.Container{validContainer("app")}
	pod.Spec.InitContainers[0].LivenessProbe = &corev1.Probe{}

	errs := Validate(pod)
	want := []fieldErr{
		errAt(tRequired, "metadata.name"),
		errAt(tNotSupported, "spec.restartPolicy"),
		errAt(tForbidden, "spec.volumes[1].persistentVolumeClaim"),
		errAt(tRequired, "spec.containers[0].image"),
		errAt(tInvalid, "spec.containers[0].ports[0].containerPort"),
		errAt(tNotFound, "spec.containers[0].volumeMounts[1].name"),
		errAt(tRequired, "spec.containers[0].envFrom[0].secretRef.name"),
		errAt(tDuplicate, "spec.containers[0].name"),
		errAt(tForbidden, "spec.initContainers[0].livenessProbe"),
	}
	if diff := gocmp.Diff(sortErrs(want), fieldErrs(errs)); diff != "" {
		t.Errorf("Validate(broken pod) mismatch (-want +got):\n%s", diff)
	}
	const notFound = `spec.containers[0].volumeMounts[1].name: Not found: "certs"`
	if !slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Error() == notFound }) {
		t.Errorf("Validate(broken pod) = %v, want an error reading %q", errs.ToAggregate(), notFound)
	}
}
