package manifests

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const msgInitOnly = "may not be set for init containers without restartPolicy=Always"

var httpSchemes = []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}

// handler is the union of the actions a probe or a lifecycle hook may take; exactly one
// must be set. Probes may not sleep and hooks may not call gRPC.
type handler struct {
	exec      *corev1.ExecAction
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction // deprecated in hooks, where it does nothing, but still accepted
	grpc      *corev1.GRPCAction
	sleep     *corev1.SleepAction
}

// validateProbesAndHooks checks probes and lifecycle hooks, which run only in containers
// that keep running: regular containers and sidecars.
func validateProbesAndHooks(c *corev1.Container, kind containerKind, spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	if kind == initContainer {
		return forbidOnInit(c, fld)
	}
	var errs field.ErrorList
	ports := namedPorts(c)
	if c.Lifecycle != nil {
		errs = append(errs, validateLifecycle(c.Lifecycle, spec, ports, fld.Child("lifecycle"))...)
	}
	if pr := c.LivenessProbe; pr != nil {
		errs = append(errs, validateProbe(pr, ports, fld.Child("livenessProbe"))...)
		errs = append(errs, succeedOnce(pr, fld.Child("livenessProbe"))...)
	}
	if pr := c.ReadinessProbe; pr != nil {
		errs = append(errs, validateProbe(pr, ports, fld.Child("readinessProbe"))...)
		if pr.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(fld.Child("readinessProbe", "terminationGracePeriodSeconds"), *pr.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
	if pr := c.StartupProbe; pr != nil {
		errs = append(errs, validateProbe(pr, ports, fld.Child("startupProbe"))...)
		errs = append(errs, succeedOnce(pr, fld.Child("startupProbe"))...)
	}
	return errs
}

func forbidOnInit(c *corev1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := []struct {
		name string
		set  bool
	}{
		{"lifecycle", c.Lifecycle != nil},
		{"livenessProbe", c.LivenessProbe != nil},
		{"readinessProbe", c.ReadinessProbe != nil},
		{"startupProbe", c.StartupProbe != nil},
	}
	for _, f := range set {
		if f.set {
			errs = append(errs, field.Forbidden(fld.Child(f.name), msgInitOnly))
		}
	}
	return errs
}

func validateProbe(pr *corev1.Probe, ports map[string]bool, fld *field.Path) field.ErrorList {
	h := handler{exec: pr.Exec, httpGet: pr.HTTPGet, tcpSocket: pr.TCPSocket, grpc: pr.GRPC}
	errs := validateHandler(h, nil, ports, fld)
	errs = append(errs, atLeast(fld.Child("initialDelaySeconds"), int64(pr.InitialDelaySeconds), 0)...)
	errs = append(errs, atLeast(fld.Child("timeoutSeconds"), int64(pr.TimeoutSeconds), 1)...)
	errs = append(errs, atLeast(fld.Child("periodSeconds"), int64(pr.PeriodSeconds), 1)...)
	errs = append(errs, atLeast(fld.Child("successThreshold"), int64(pr.SuccessThreshold), 1)...)
	errs = append(errs, atLeast(fld.Child("failureThreshold"), int64(pr.FailureThreshold), 1)...)
	if g := pr.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *g, msgNotPositive))
	}
	return errs
}

// succeedOnce requires successThreshold 1, the only value liveness and startup probes
// accept; a threshold below 1 is already reported by validateProbe.
func succeedOnce(pr *corev1.Probe, fld *field.Path) field.ErrorList {
	if pr.SuccessThreshold > 1 {
		return field.ErrorList{field.Invalid(fld.Child("successThreshold"), pr.SuccessThreshold, "must be 1")}
	}
	return nil
}

func validateLifecycle(lc *corev1.Lifecycle, spec *corev1.PodSpec, ports map[string]bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, hook := range []struct {
		name string
		h    *corev1.LifecycleHandler
	}{{"postStart", lc.PostStart}, {"preStop", lc.PreStop}} {
		if hook.h != nil {
			h := handler{exec: hook.h.Exec, httpGet: hook.h.HTTPGet, tcpSocket: hook.h.TCPSocket, sleep: hook.h.Sleep}
			errs = append(errs, validateHandler(h, spec.TerminationGracePeriodSeconds, ports, fld.Child(hook.name))...)
		}
	}
	if lc.StopSignal != nil {
		errs = append(errs, validateStopSignal(*lc.StopSignal, spec.OS, fld.Child("stopSignal"))...)
	}
	return errs
}

// validateHandler checks that exactly one action is set and that it is well formed.
// grace bounds a sleep action; it is nil for probes, which cannot sleep.
func validateHandler(h handler, grace *int64, ports map[string]bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	actions := 0
	check := func(name string, set bool, validate func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		p := fld.Child(name)
		if actions++; actions > 1 {
			errs = append(errs, field.Forbidden(p, "may not specify more than 1 handler type"))
			return
		}
		errs = append(errs, validate(p)...)
	}
	check("exec", h.exec != nil, func(p *field.Path) field.ErrorList {
		if len(h.exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	check("httpGet", h.httpGet != nil, func(p *field.Path) field.ErrorList { return validateHTTPGet(h.httpGet, ports, p) })
	check("tcpSocket", h.tcpSocket != nil, func(p *field.Path) field.ErrorList { return validatePortRef(h.tcpSocket.Port, ports, p.Child("port")) })
	check("grpc", h.grpc != nil, func(p *field.Path) field.ErrorList {
		return invalidMsgs(p.Child("port"), h.grpc.Port, validation.IsValidPortNum(int(h.grpc.Port)))
	})
	check("sleep", h.sleep != nil, func(p *field.Path) field.ErrorList {
		if s := h.sleep.Seconds; grace != nil && (s < 0 || s > *grace) {
			return field.ErrorList{field.Invalid(p.Child("seconds"), s, fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *grace))}
		}
		return nil
	})
	if actions == 0 {
		errs = append(errs, field.Required(fld, "must specify a handler type"))
	}
	return errs
}

func validateHTTPGet(get *corev1.HTTPGetAction, ports map[string]bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if get.Path == "" {
		errs = append(errs, field.Required(fld.Child("path"), ""))
	}
	errs = append(errs, validatePortRef(get.Port, ports, fld.Child("port"))...)
	errs = append(errs, requiredEnum(fld.Child("scheme"), get.Scheme, httpSchemes)...)
	for i, hdr := range get.HTTPHeaders {
		errs = append(errs, invalidMsgs(fld.Child("httpHeaders").Index(i).Child("name"), hdr.Name, validation.IsHTTPHeaderName(hdr.Name))...)
	}
	return errs
}

// validatePortRef checks a port given by number or by name; a name must be one of the
// container's named ports, since that is where it is looked up.
func validatePortRef(port intstr.IntOrString, ports map[string]bool, fld *field.Path) field.ErrorList {
	if port.Type == intstr.Int {
		return invalidMsgs(fld, port.IntVal, validation.IsValidPortNum(int(port.IntVal)))
	}
	if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
		return invalidMsgs(fld, port.StrVal, msgs)
	}
	if !ports[port.StrVal] {
		return field.ErrorList{field.NotFound(fld, port.StrVal)}
	}
	return nil
}

func namedPorts(c *corev1.Container) map[string]bool {
	names := map[string]bool{}
	for _, p := range c.Ports {
		if p.Name != "" {
			names[p.Name] = true
		}
	}
	return names
}

// validateStopSignal checks a stop signal, which is only meaningful for a known OS.
func validateStopSignal(sig corev1.Signal, os *corev1.PodOS, fld *field.Path) field.ErrorList {
	switch {
	case os == nil || os.Name == "":
		return field.ErrorList{field.Forbidden(fld, "may not be set for pods without spec.os.name")}
	case os.Name == corev1.Windows:
		return enum(fld, sig, []corev1.Signal{corev1.SIGKILL, corev1.SIGTERM})
	case !linuxSignal(sig):
		return field.ErrorList{field.Invalid(fld, sig, "must be a Linux signal name such as SIGTERM, SIGINT, SIGQUIT or SIGRTMIN+3")}
	}
	return nil
}

const linuxSignalNames = "ABRT ALRM BUS CHLD CLD CONT FPE HUP ILL INT IO IOT KILL PIPE POLL PROF PWR QUIT " +
	"SEGV STKFLT STOP SYS TERM TRAP TSTP TTIN TTOU URG USR1 USR2 VTALRM WINCH XCPU XFSZ RTMIN RTMAX"

// linuxSignal reports whether sig is one of the corev1.Signal values for Linux: the named
// signals, SIGRTMIN+1..15 and SIGRTMAX-14..1.
func linuxSignal(sig corev1.Signal) bool {
	name, ok := strings.CutPrefix(string(sig), "SIG")
	if !ok {
		return false
	}
	if slices.Contains(strings.Fields(linuxSignalNames), name) {
		return true
	}
	for n := 1; n <= 15; n++ {
		if name == fmt.Sprintf("RTMIN+%d", n) || (n <= 14 && name == fmt.Sprintf("RTMAX-%d", n)) {
			return true
		}
	}
	return false
}
