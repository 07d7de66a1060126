package manifests

// The field contract of probes and lifecycle hooks, and of the handlers both run (see
// contract.go).

var handlerRules = map[string]map[string]rule{
	"Probe": {
		"exec":                          honoured("runner.TestExecActionAndSleep"),
		"httpGet":                       honoured("e2e.TestReadinessProbeFollowsHTTP"),
		"tcpSocket":                     honoured("runner.TestTCPAndGRPCActions"),
		"grpc":                          honoured("runner.TestTCPAndGRPCActions"),
		"initialDelaySeconds":           pendingProof(reasonNoProof),
		"timeoutSeconds":                honoured("runner.TestProbeResults"),
		"periodSeconds":                 honoured("runner.TestProbeResults"),
		"successThreshold":              honoured("runner.TestProbeResults"),
		"failureThreshold":              honoured("e2e.TestLivenessProbeRestarts"),
		"terminationGracePeriodSeconds": pendingProof(reasonNoProof),
	},
	"ExecAction": {
		"command": honoured("runner.TestExecActionAndSleep"),
	},
	"HTTPGetAction": {
		"path":        honoured("runner.TestHTTPAction"),
		"port":        honoured("runner.TestHTTPAction"),
		"host":        honoured("runner.TestHTTPAction"),
		"scheme":      honoured("runner.TestHTTPAction"),
		"httpHeaders": honoured("runner.TestHTTPAction"),
		"protocol":    refusedWhen("`HTTP2`", msgHTTP2Probe),
	},
	"HTTPHeader": {
		"name":  honoured("runner.TestHTTPAction"),
		"value": honoured("runner.TestHTTPAction"),
	},
	"TCPSocketAction": {
		"port": honoured("runner.TestTCPAndGRPCActions"),
		"host": honoured("runner.TestTCPAndGRPCActions"),
	},
	"GRPCAction": {
		"port":    honoured("runner.TestTCPAndGRPCActions"),
		"service": honoured("runner.TestTCPAndGRPCActions"),
		"mode":    refusedWhen("`TLS`", msgGRPCTLS),
	},
	"Lifecycle": {
		"postStart":  honoured("e2e.TestInitContainersSidecarsAndHooks"),
		"preStop":    honoured("e2e.TestInitContainersSidecarsAndHooks"),
		"stopSignal": honoured("containerdrt/spec.TestStopSignal"),
	},
	"LifecycleHandler": {
		"exec":      honoured("e2e.TestInitContainersSidecarsAndHooks"),
		"httpGet":   honoured("runner.TestHTTPAction"),
		"tcpSocket": honouredNote("runner.TestTCPAndGRPCActions", "deprecated in hooks: staticpod opens a TCP connection, as for a probe, where the kubelet fails the hook"),
		"sleep":     honoured("runner.TestExecActionAndSleep"),
	},
	"SleepAction": {
		"seconds": honoured("runner.TestExecActionAndSleep"),
	},
}
