package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestValidateContainers(t *testing.T) {
	runValidateCases(t, validPod, []validateCase{
		{"no containers", func(p *corev1.Pod) { p.Spec.Containers = nil }, []fieldErr{errAt(tRequired, "spec.containers")}},
		{"bad name", func(p *corev1.Pod) { ctr(p).Name = "App" }, []fieldErr{errAt(tInvalid, "spec.containers[0].name")}},
		{"duplicate names across lists", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{validContainer("app")}
			p.Spec.Containers = append(p.Spec.Containers, validContainer("app"))
			p.Spec.Containers[1].Ports = nil
		}, []fieldErr{errAt(tDuplicate, "spec.containers[0].name"), errAt(tDuplicate, "spec.containers[1].name")}},
		{"image", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, validContainer("b"))
			ctr(p).Image, p.Spec.Containers[1].Image = "", " nginx "
			p.Spec.Containers[1].Ports = nil
		}, []fieldErr{errAt(tRequired, "spec.containers[0].image"), errAt(tInvalid, "spec.containers[1].image")}},
		{"enums", func(p *corev1.Pod) {
			ctr(p).ImagePullPolicy, ctr(p).TerminationMessagePolicy = "Sometimes", "Stdout"
			ctr(p).TerminationMessagePath = ""
		}, []fieldErr{
			errAt(tNotSupported, "spec.containers[0].imagePullPolicy"), errAt(tNotSupported, "spec.containers[0].terminationMessagePolicy"),
			errAt(tRequired, "spec.containers[0].terminationMessagePath"),
		}},
		{"restartPolicy on a regular container", func(p *corev1.Pod) { ctr(p).RestartPolicy = new(corev1.ContainerRestartPolicyAlways) },
			[]fieldErr{errAt(tForbidden, "spec.containers[0].restartPolicy")}},
		{"restartPolicy OnFailure on an init container and restart rules", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{validContainer("init")}
			p.Spec.InitContainers[0].Ports = nil
			p.Spec.InitContainers[0].RestartPolicy = new(corev1.ContainerRestartPolicyOnFailure)
			p.Spec.InitContainers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart}}
		}, []fieldErr{errAt(tNotSupported, "spec.initContainers[0].restartPolicy"), errAt(tForbidden, "spec.initContainers[0].restartPolicyRules")}},
	})
}

func TestValidatePorts(t *testing.T) {
	port := func(p *corev1.Pod, i int) *corev1.ContainerPort { return &ctr(p).Ports[i] }
	runValidateCases(t, validPod, []validateCase{
		{"numbers and protocol", func(p *corev1.Pod) {
			ctr(p).Ports = append(ctr(p).Ports, corev1.ContainerPort{HostPort: -1, Protocol: "ICMP"}, corev1.ContainerPort{ContainerPort: 70000, HostPort: 70000})
		}, []fieldErr{
			errAt(tRequired, "spec.containers[0].ports[1].containerPort"), errAt(tInvalid, "spec.containers[0].ports[1].hostPort"),
			errAt(tNotSupported, "spec.containers[0].ports[1].protocol"),
			errAt(tInvalid, "spec.containers[0].ports[2].containerPort"), errAt(tInvalid, "spec.containers[0].ports[2].hostPort"),
			errAt(tRequired, "spec.containers[0].ports[2].protocol"),
		}},
		{"names", func(p *corev1.Pod) {
			ctr(p).Ports = append(ctr(p).Ports,
				corev1.ContainerPort{Name: "http", ContainerPort: 8081, Protocol: corev1.ProtocolTCP},
				corev1.ContainerPort{Name: "way-too-long-name", ContainerPort: 8082, Protocol: corev1.ProtocolTCP})
		}, []fieldErr{errAt(tDuplicate, "spec.containers[0].ports[1].name"), errAt(tInvalid, "spec.containers[0].ports[2].name")}},
		{"host port taken twice", func(p *corev1.Pod) {
			port(p, 0).HostPort = 80
			other := validContainer("other")
			other.Ports = []corev1.ContainerPort{
				{ContainerPort: 80, HostPort: 80, Protocol: corev1.ProtocolTCP},
				{ContainerPort: 80, HostPort: 80, Protocol: corev1.ProtocolUDP},
				{ContainerPort: 81, HostPort: 80, HostIP: "127.0.0.1", Protocol: corev1.ProtocolTCP},
			}
			p.Spec.Containers = append(p.Spec.Containers, other)
		}, []fieldErr{errAt(tDuplicate, "spec.containers[1].ports[0].hostPort")}},
		{"host port taken twice by one init container", func(p *corev1.Pod) {
			init := validContainer("init")
			init.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}, {ContainerPort: 81, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
			p.Spec.InitContainers = []corev1.Container{init}
			port(p, 0).HostPort = 8080 // init containers run before, not beside, the others
		}, []fieldErr{errAt(tDuplicate, "spec.initContainers[0].ports[1].hostPort")}},
		{"hostNetwork with a different host port", func(p *corev1.Pod) { p.Spec.HostNetwork, port(p, 0).HostPort = true, 80 },
			[]fieldErr{errAt(tInvalid, "spec.containers[0].ports[0].hostPort")}},
	})
}

func TestValidateEnv(t *testing.T) {
	fieldRef := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	env := func(p *corev1.Pod, vars ...corev1.EnvVar) { ctr(p).Env = vars }
	runValidateCases(t, validPod, []validateCase{
		{"names", func(p *corev1.Pod) {
			env(p, corev1.EnvVar{Value: "x"}, corev1.EnvVar{Name: "A=B"}, corev1.EnvVar{Name: "ÄPFEL"})
		},
			[]fieldErr{errAt(tRequired, "spec.containers[0].env[0].name"), errAt(tInvalid, "spec.containers[0].env[1].name"), errAt(tInvalid, "spec.containers[0].env[2].name")}},
		{"valueFrom needs exactly one source and no value", func(p *corev1.Pod) {
			both := fieldRef("metadata.name")
			both.ResourceFieldRef = &corev1.ResourceFieldSelector{Resource: "limits.cpu"}
			env(p, corev1.EnvVar{Name: "A", ValueFrom: &corev1.EnvVarSource{}},
				corev1.EnvVar{Name: "B", Value: "b", ValueFrom: fieldRef("metadata.name")},
				corev1.EnvVar{Name: "C", ValueFrom: both})
		}, []fieldErr{
			errAt(tInvalid, "spec.containers[0].env[0].valueFrom"), errAt(tInvalid, "spec.containers[0].env[1].valueFrom"),
			errAt(tInvalid, "spec.containers[0].env[2].valueFrom"),
		}},
		{"fieldRef paths", func(p *corev1.Pod) {
			env(p, corev1.EnvVar{Name: "A", ValueFrom: fieldRef("spec.restartPolicy")},
				corev1.EnvVar{Name: "B", ValueFrom: fieldRef("metadata.labels")},
				corev1.EnvVar{Name: "C", ValueFrom: fieldRef("metadata.labels['bad key']")},
				corev1.EnvVar{Name: "D", ValueFrom: fieldRef("spec.nodeName['x']")},
				corev1.EnvVar{Name: "E", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}},
				corev1.EnvVar{Name: "F", ValueFrom: fieldRef("")})
		}, []fieldErr{
			errAt(tNotSupported, "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath"),
			errAt(tNotSupported, "spec.containers[0].env[1].valueFrom.fieldRef.fieldPath"),
			errAt(tInvalid, "spec.containers[0].env[2].valueFrom.fieldRef.fieldPath"),
			errAt(tInvalid, "spec.containers[0].env[3].valueFrom.fieldRef.fieldPath"),
			errAt(tNotSupported, "spec.containers[0].env[4].valueFrom.fieldRef.apiVersion"),
			errAt(tRequired, "spec.containers[0].env[5].valueFrom.fieldRef.fieldPath"),
		}},
		{"resourceFieldRef", func(p *corev1.Pod) {
			ref := func(res, divisor string) *corev1.EnvVarSource {
				return &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: res, Divisor: resource.MustParse(divisor)}}
			}
			env(p, corev1.EnvVar{Name: "A", ValueFrom: ref("limits.gpu", "0")},
				corev1.EnvVar{Name: "B", ValueFrom: ref("requests.cpu", "10m")},
				corev1.EnvVar{Name: "C", ValueFrom: ref("limits.memory", "3Mi")},
				corev1.EnvVar{Name: "D", ValueFrom: ref("limits.hugepages-2Mi", "1Mi")},
				corev1.EnvVar{Name: "E", ValueFrom: ref("", "0")})
		}, []fieldErr{
			errAt(tNotSupported, "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource"),
			errAt(tInvalid, "spec.containers[0].env[1].valueFrom.resourceFieldRef.divisor"),
			errAt(tInvalid, "spec.containers[0].env[2].valueFrom.resourceFieldRef.divisor"),
			errAt(tRequired, "spec.containers[0].env[4].valueFrom.resourceFieldRef.resource"),
		}},
	})
}

func TestValidateVolumeMounts(t *testing.T) {
	mount := func(p *corev1.Pod) *corev1.VolumeMount { return &ctr(p).VolumeMounts[0] }
	add := func(p *corev1.Pod, m corev1.VolumeMount) { ctr(p).VolumeMounts = append(ctr(p).VolumeMounts, m) }
	runValidateCases(t, validPod, []validateCase{
		{"unknown volume", func(p *corev1.Pod) { add(p, corev1.VolumeMount{Name: "certs", MountPath: "/certs"}) },
			[]fieldErr{errAt(tNotFound, "spec.containers[0].volumeMounts[1].name")}},
		{"no name and no path", func(p *corev1.Pod) { add(p, corev1.VolumeMount{}) },
			[]fieldErr{errAt(tRequired, "spec.containers[0].volumeMounts[1].name"), errAt(tRequired, "spec.containers[0].volumeMounts[1].mountPath")}},
		{"relative and repeated paths", func(p *corev1.Pod) {
			add(p, corev1.VolumeMount{Name: "data", MountPath: "data"})
			add(p, corev1.VolumeMount{Name: "data", MountPath: "/data"})
		}, []fieldErr{errAt(tInvalid, "spec.containers[0].volumeMounts[1].mountPath"), errAt(tInvalid, "spec.containers[0].volumeMounts[2].mountPath")}},
		{"subPath leaves the volume", func(p *corev1.Pod) {
			mount(p).SubPath = "/etc"
			add(p, corev1.VolumeMount{Name: "data", MountPath: "/b", SubPath: "x/../..", SubPathExpr: "$(POD)"})
		}, []fieldErr{
			errAt(tInvalid, "spec.containers[0].volumeMounts[0].subPath"),
			errAt(tInvalid, "spec.containers[0].volumeMounts[1].subPath"), errAt(tInvalid, "spec.containers[0].volumeMounts[1].subPathExpr"),
		}},
		{"propagation", func(p *corev1.Pod) {
			mount(p).MountPropagation = new(corev1.MountPropagationBidirectional)
			add(p, corev1.VolumeMount{Name: "data", MountPath: "/b", MountPropagation: new(corev1.MountPropagationMode("Shared"))})
			add(p, corev1.VolumeMount{Name: "data", MountPath: "/c", RecursiveReadOnly: new(corev1.RecursiveReadOnlyEnabled),
				MountPropagation: new(corev1.MountPropagationHostToContainer)})
		}, []fieldErr{
			errAt(tForbidden, "spec.containers[0].volumeMounts[0].mountPropagation"),
			errAt(tNotSupported, "spec.containers[0].volumeMounts[1].mountPropagation"),
			errAt(tForbidden, "spec.containers[0].volumeMounts[2].recursiveReadOnly"), errAt(tForbidden, "spec.containers[0].volumeMounts[2].recursiveReadOnly"),
		}},
		{"bidirectional in a privileged container", func(p *corev1.Pod) {
			mount(p).MountPropagation = new(corev1.MountPropagationBidirectional)
			ctr(p).SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
		}, nil},
	})
}

func TestValidateResources(t *testing.T) {
	q := resource.MustParse
	set := func(p *corev1.Pod, limits, requests corev1.ResourceList) {
		ctr(p).Resources = corev1.ResourceRequirements{Limits: limits, Requests: requests}
	}
	runValidateCases(t, validPod, []validateCase{
		{"names", func(p *corev1.Pod) {
			set(p, nil, corev1.ResourceList{"gpu": q("1"), "pods": q("1"), "example.com/": q("1"), "requests.example.com/x": q("1")})
		}, []fieldErr{
			errAt(tInvalid, "spec.containers[0].resources.requests[example.com/]"), // an empty name part, and so
			errAt(tInvalid, "spec.containers[0].resources.requests[example.com/]"), // one not matching the regex
			errAt(tInvalid, "spec.containers[0].resources.requests[gpu]"),
			errAt(tInvalid, "spec.containers[0].resources.requests[pods]"), errAt(tInvalid, "spec.containers[0].resources.requests[requests.example.com/x]"),
		}},
		{"negative and above the limit", func(p *corev1.Pod) {
			set(p, corev1.ResourceList{"cpu": q("1")}, corev1.ResourceList{"cpu": q("2"), "memory": q("-1Mi")})
		}, []fieldErr{errAt(tInvalid, "spec.containers[0].resources.requests[cpu]"), errAt(tInvalid, "spec.containers[0].resources.requests[memory]")}},
		{"extended resources", func(p *corev1.Pod) {
			set(p, corev1.ResourceList{"example.com/gpu": q("2"), "example.com/fpga": q("500m")},
				corev1.ResourceList{"example.com/gpu": q("1"), "example.com/nic": q("1"), "example.com/fpga": q("500m")})
		}, []fieldErr{
			errAt(tInvalid, "spec.containers[0].resources.limits[example.com/fpga]"), errAt(tInvalid, "spec.containers[0].resources.requests[example.com/fpga]"),
			errAt(tInvalid, "spec.containers[0].resources.requests[example.com/gpu]"), errAt(tRequired, "spec.containers[0].resources.limits[example.com/nic]"),
		}},
		{"huge pages", func(p *corev1.Pod) {
			set(p, corev1.ResourceList{"hugepages-2Mi": q("3Mi")}, corev1.ResourceList{"hugepages-2Mi": q("3Mi")})
		}, []fieldErr{
			errAt(tForbidden, "spec.containers[0].resources"),
			errAt(tInvalid, "spec.containers[0].resources.limits[hugepages-2Mi]"), errAt(tInvalid, "spec.containers[0].resources.requests[hugepages-2Mi]"),
		}},
	})
}

func TestValidateProbes(t *testing.T) {
	probe := func(h corev1.ProbeHandler) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: h, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	}
	get := func(port intstr.IntOrString) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: port, Scheme: corev1.URISchemeHTTP}}
	}
	runValidateCases(t, validPod, []validateCase{
		{"no handler and two handlers", func(p *corev1.Pod) {
			ctr(p).LivenessProbe = probe(corev1.ProbeHandler{})
			two := get(intstr.FromInt32(8080))
			two.Exec = &corev1.ExecAction{}
			ctr(p).ReadinessProbe = probe(two)
		}, []fieldErr{
			errAt(tRequired, "spec.containers[0].livenessProbe"),
			errAt(tRequired, "spec.containers[0].readinessProbe.exec.command"), errAt(tForbidden, "spec.containers[0].readinessProbe.httpGet"),
		}},
		{"ports", func(p *corev1.Pod) {
			ctr(p).LivenessProbe = probe(get(intstr.FromString("metrics")))
			ctr(p).ReadinessProbe = probe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(0)}})
			ctr(p).StartupProbe = probe(corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 70000}})
		}, []fieldErr{
			errAt(tNotFound, "spec.containers[0].livenessProbe.httpGet.port"), errAt(tInvalid, "spec.containers[0].readinessProbe.tcpSocket.port"),
			errAt(tInvalid, "spec.containers[0].startupProbe.grpc.port"),
		}},
		{"httpGet fields", func(p *corev1.Pod) {
			h := get(intstr.FromString("http"))
			h.HTTPGet.Path, h.HTTPGet.Scheme = "", "FTP"
			h.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "Bad Header", Value: "x"}}
			ctr(p).LivenessProbe = probe(h)
		}, []fieldErr{
			errAt(tRequired, "spec.containers[0].livenessProbe.httpGet.path"), errAt(tNotSupported, "spec.containers[0].livenessProbe.httpGet.scheme"),
			errAt(tInvalid, "spec.containers[0].livenessProbe.httpGet.httpHeaders[0].name"),
		}},
		{"timings", func(p *corev1.Pod) {
			pr := probe(get(intstr.FromString("http")))
			pr.InitialDelaySeconds, pr.TimeoutSeconds, pr.PeriodSeconds, pr.SuccessThreshold, pr.FailureThreshold = -1, 0, 0, 0, 0
			pr.TerminationGracePeriodSeconds = new(int64(0))
			ctr(p).LivenessProbe = pr
		}, []fieldErr{
			errAt(tInvalid, "spec.containers[0].livenessProbe.initialDelaySeconds"), errAt(tInvalid, "spec.containers[0].livenessProbe.timeoutSeconds"),
			errAt(tInvalid, "spec.containers[0].livenessProbe.periodSeconds"), errAt(tInvalid, "spec.containers[0].livenessProbe.successThreshold"),
			errAt(tInvalid, "spec.containers[0].livenessProbe.failureThreshold"), errAt(tInvalid, "spec.containers[0].livenessProbe.terminationGracePeriodSeconds"),
		}},
		{"liveness and startup succeed once, readiness has no grace period", func(p *corev1.Pod) {
			for _, pr := range []**corev1.Probe{&ctr(p).LivenessProbe, &ctr(p).StartupProbe, &ctr(p).ReadinessProbe} {
				*pr = probe(get(intstr.FromInt32(8080)))
				(*pr).SuccessThreshold = 2
			}
			ctr(p).ReadinessProbe.TerminationGracePeriodSeconds = new(int64(5))
		}, []fieldErr{
			errAt(tInvalid, "spec.containers[0].livenessProbe.successThreshold"), errAt(tInvalid, "spec.containers[0].startupProbe.successThreshold"),
			errAt(tInvalid, "spec.containers[0].readinessProbe.terminationGracePeriodSeconds"),
		}},
		{"init containers may not probe or hook", func(p *corev1.Pod) {
			init := validContainer("init")
			init.Ports = nil
			init.LivenessProbe, init.ReadinessProbe, init.StartupProbe = probe(get(intstr.FromInt32(80))), probe(get(intstr.FromInt32(80))), probe(get(intstr.FromInt32(80)))
			init.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}}
			p.Spec.InitContainers = []corev1.Container{init}
		}, []fieldErr{
			errAt(tForbidden, "spec.initContainers[0].lifecycle"), errAt(tForbidden, "spec.initContainers[0].livenessProbe"),
			errAt(tForbidden, "spec.initContainers[0].readinessProbe"), errAt(tForbidden, "spec.initContainers[0].startupProbe"),
		}},
		{"lifecycle hooks", func(p *corev1.Pod) {
			ctr(p).Lifecycle = &corev1.Lifecycle{
				PostStart:  &corev1.LifecycleHandler{},
				PreStop:    &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 31}},
				StopSignal: new(corev1.SIGTERM),
			}
		}, []fieldErr{
			errAt(tRequired, "spec.containers[0].lifecycle.postStart"), errAt(tInvalid, "spec.containers[0].lifecycle.preStop.sleep.seconds"),
			errAt(tForbidden, "spec.containers[0].lifecycle.stopSignal"),
		}},
		{"stop signal", func(p *corev1.Pod) {
			p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			ctr(p).Lifecycle = &corev1.Lifecycle{StopSignal: new(corev1.Signal("SIGRTMIN+16"))}
		}, []fieldErr{errAt(tInvalid, "spec.containers[0].lifecycle.stopSignal")}},
	})
}

func TestValidateContainerSecurity(t *testing.T) {
	sc := func(p *corev1.Pod) *corev1.SecurityContext {
		ctr(p).SecurityContext = &corev1.SecurityContext{}
		return ctr(p).SecurityContext
	}
	runValidateCases(t, validPod, []validateCase{
		{"IDs", func(p *corev1.Pod) { s := sc(p); s.RunAsUser, s.RunAsGroup = new(int64(-1)), new(int64(1<<31)) },
			[]fieldErr{errAt(tInvalid, "spec.containers[0].securityContext.runAsUser"), errAt(tInvalid, "spec.containers[0].securityContext.runAsGroup")}},
		{"privileged without escalation", func(p *corev1.Pod) {
			s := sc(p)
			s.Privileged, s.AllowPrivilegeEscalation = new(true), new(false)
			s.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"CAP_SYS_ADMIN"}}
		}, []fieldErr{
			errAt(tInvalid, "spec.containers[0].securityContext.allowPrivilegeEscalation"),
			errAt(tInvalid, "spec.containers[0].securityContext.allowPrivilegeEscalation"),
		}},
		{"procMount", func(p *corev1.Pod) { sc(p).ProcMount = new(corev1.UnmaskedProcMount) },
			[]fieldErr{errAt(tInvalid, "spec.containers[0].securityContext.procMount")}},
		{"profiles", func(p *corev1.Pod) {
			s := sc(p)
			s.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: new("../escape.json")}
			s.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: new(" padded ")}
		}, []fieldErr{
			errAt(tInvalid, "spec.containers[0].securityContext.seccompProfile.localhostProfile"),
			errAt(tInvalid, "spec.containers[0].securityContext.appArmorProfile.localhostProfile"),
		}},
		{"selinux level containerd refuses", func(p *corev1.Pod) { sc(p).SELinuxOptions = &corev1.SELinuxOptions{Level: "s0:c1:c2"} },
			[]fieldErr{errAt(tInvalid, "spec.containers[0].securityContext.seLinuxOptions.level")}},
	})
}
