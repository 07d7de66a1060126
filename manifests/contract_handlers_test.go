package manifests

// The field contract of probes and lifecycle hooks, and of the handlers both run (see
// contract_table_test.go).

var handlerRules = map[string]map[string]rule{
	"Probe": {
		"exec":                          honoured("runner/action.TestExecActionAndSleep"),
		"httpGet":                       honoured("e2e.TestReadinessProbeFollowsHTTP"),
		"tcpSocket":                     honoured("runner/action.TestTCPAndGRPCActions"),
		"grpc":                          honoured("runner/action.TestTCPAndGRPCActions"),
		"initialDelaySeconds":           honoured("runner.TestProbeWaitsForItsInitialDelay"),
		"timeoutSeconds":                honoured("runner.TestProbeResults"),
		"periodSeconds":                 honoured("runner.TestProbeResults"),
		"successThreshold":              honoured("runner.TestProbeResults"),
		"failureThreshold":              honoured("e2e.TestLivenessProbeRestarts"),
		"terminationGracePeriodSeconds": honoured("runner.TestFailedProbeKillsWithTheProbesGrace"),
	},
	"ExecAction": {
		"command": honoured("runner/action.TestExecActionAndSleep"),
	},
	"HTTPGetAction": {
		"path":        honoured("runner/action.TestHTTPAction"),
		"port":        honoured("runner/action.TestHTTPAction"),
		"host":        honoured("runner/action.TestHTTPAction"),
		"scheme":      honoured("runner/action.TestHTTPAction"),
		"httpHeaders": honoured("runner/action.TestHTTPAction"),
		"protocol":    refusedWhen("`HTTP2`", msgHTTP2Probe),
	},
	"HTTPHeader": {
		"name":  honoured("runner/action.TestHTTPAction"),
		"value": honoured("runner/action.TestHTTPAction"),
	},
	"TCPSocketAction": {
		"port": honoured("runner/action.TestTCPAndGRPCActions"),
		"host": honoured("runner/action.TestTCPAndGRPCActions"),
	},
	"GRPCAction": {
		"port":    honoured("runner/action.TestTCPAndGRPCActions"),
		"service": honoured("runner/action.TestTCPAndGRPCActions"),
		"mode":    refusedWhen("`TLS`", msgGRPCTLS),
	},
	"Lifecycle": {
		"postStart":  honoured("e2e.TestInitContainersSidecarsAndHooks"),
		"preStop":    honoured("e2e.TestInitContainersSidecarsAndHooks"),
		"stopSignal": honoured("containerdrt/spec.TestStopSignal"),
	},
	"LifecycleHandler": {
		"exec":      honoured("e2e.TestInitContainersSidecarsAndHooks"),
		"httpGet":   honoured("runner/action.TestHTTPAction"),
		"tcpSocket": honouredNote("runner/action.TestTCPAndGRPCActions", "deprecated in hooks: staticpod opens a TCP connection, as for a probe, where the kubelet fails the hook"),
		"sleep":     honoured("runner/action.TestExecActionAndSleep"),
	},
	"SleepAction": {
		"seconds": honoured("runner/action.TestExecActionAndSleep"),
	},
}
