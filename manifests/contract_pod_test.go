package manifests

// The field contract of a Pod's own fields, its metadata and its spec (see contract_table_test.go).

// Reasons shared by several fields of no effect.
const (
	noteHostUsers = "a user namespace of the pod's own, 65536 IDs allocated per pod above the host's first 65536 and kept in the pod's directory across restarts; the image's files and the volumes staticpod writes are owned by the mapped IDs; " +
		"hostPath and image volumes are refused: " + msgUserNSVolume
	reasonScheduling = "a scheduling field: a static pod runs on the node whose staticpod reads it, and is never scheduled"
	reasonAPIServer  = "set and read by an apiserver, which static pods do not have"
	reasonWindows    = "Windows only: a Linux node ignores it, as the kubelet does"
)

var podRules = map[string]map[string]rule{
	"Pod": {
		"kind":       honoured("manifests.TestDecode"),
		"apiVersion": honoured("manifests.TestDecode"),
		"metadata":   honoured("manifests.TestIdentify"),
		"spec":       honoured("e2e.TestRunFollowsTheManifestDirectory"),
		"status":     noEffect("what staticpod reports (`staticpod ps`, the API); a manifest's status is dropped, as the apiserver drops it on create"),
	},
	"ObjectMeta": {
		"name":                       honouredNote("manifests.TestIdentify", "the pod is named `<name>-<node>`, as the kubelet names static pods"),
		"generateName":               noEffect("a static pod needs a fixed name (a missing name is an error); with a name, generateName is unused, as on a cluster"),
		"namespace":                  honoured("manifests.TestIdentify"),
		"selfLink":                   noEffect(reasonAPIServer),
		"uid":                        honouredNote("e2e.TestEditOfAPodThatGivesItsUIDReplacesItsContainer", "a plain token, unique across sources; without one the UID is a hash of the pod, node and source"),
		"resourceVersion":            noEffect(reasonAPIServer),
		"generation":                 noEffect(reasonAPIServer),
		"creationTimestamp":          noEffect(reasonAPIServer),
		"deletionTimestamp":          noEffect(reasonAPIServer + "; a static pod is deleted by removing its manifest"),
		"deletionGracePeriodSeconds": noEffect(reasonAPIServer + "; spec.terminationGracePeriodSeconds decides"),
		"labels":                     honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"annotations":                honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"ownerReferences":            noEffect("read by an apiserver's garbage collector, which static pods do not have"),
		"finalizers":                 noEffect(reasonAPIServer + "; a static pod is deleted by removing its manifest"),
		"managedFields":              noEffect(reasonAPIServer),
	},
}

var specRules = map[string]map[string]rule{
	"PodSpec": {
		"volumes":                       honoured("containerdrt.TestMountsHostPathInContainer"),
		"initContainers":                honoured("e2e.TestInitContainersSidecarsAndHooks"),
		"containers":                    honoured("e2e.TestRunFollowsTheManifestDirectory"),
		"ephemeralContainers":           refused(msgEphemeralContainers),
		"restartPolicy":                 honoured("e2e.TestRunRestartsWithBackoffAndFinishesJobs"),
		"terminationGracePeriodSeconds": honoured("e2e.TestGracePeriodBeforeKill"),
		"activeDeadlineSeconds":         honoured("e2e.TestActiveDeadlineFailsThePodCountedFromItsFirstStart"),
		"dnsPolicy":                     honoured("containerdrt/poddir.TestResolvConf"),
		"nodeSelector":                  honouredNote(proofFleet, "matched against the node's labels (`--node-labels`, `kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`) at admission: a pod that does not match is Failed (`NodeAffinity`), as on the kubelet"),
		"serviceAccountName":            refusedWhen("it is not `default`", msgServiceAccount),
		"serviceAccount":                refusedWhen("it is not `default`", msgServiceAccount),
		"automountServiceAccountToken":  refusedWhen("`true`", msgAutomount),
		"nodeName":                      honouredNote("containerdrt/spec.TestDownwardEnv", "set to the node's name, as the kubelet sets it for static pods"),
		"hostNetwork":                   honoured("containerdrt.TestHostNetworkPodSeesHostInterfaces"),
		"hostPID":                       honoured("containerdrt.TestHostPIDAndIPC"),
		"hostIPC":                       honoured("containerdrt.TestHostPIDAndIPC"),
		"shareProcessNamespace":         honoured("containerdrt.TestSharedProcessNamespace"),
		"securityContext":               honoured("containerdrt.TestSpecUserInContainer"),
		"imagePullSecrets":              honoured("containerdrt/images.TestEnsureUsesPodPullSecrets"),
		"hostname":                      honoured("containerdrt/poddir.TestHostsFilePodNetwork"),
		"subdomain":                     honoured("containerdrt/poddir.TestHostsFilePodNetwork"),
		"affinity":                      honoured(proofFleet),
		"schedulerName":                 noEffect(reasonScheduling),
		"tolerations":                   honouredNote(proofFleet, "against the node's NoExecute taints (`--register-with-taints`) at admission: a pod that does not tolerate one is Failed (`TaintToleration`); the kubelet checks them for the pods of an apiserver only, staticpod for every pod, and file pods tolerate every NoExecute taint as the kubelet's do"),
		"hostAliases":                   honoured("containerdrt/poddir.TestHostsFilePodNetwork"),
		"priorityClassName":             honouredNote("containerdrt/spec.TestOOMScoreAdj", "`system-node-critical` gives the kubelet's OOM score and stops last at shutdown (`runner.TestStopForShutdown`); it and `system-cluster-critical` are admitted whatever they request (`e2e.TestResourceAdmissionRefusesWhatTheNodeCannotHold`); other names have no effect"),
		"priority":                      noEffect("set by the apiserver from priorityClassName; staticpod reads priorityClassName"),
		"dnsConfig":                     honoured("containerdrt/poddir.TestResolvConf"),
		"readinessGates":                refused(msgReadinessGates),
		"runtimeClassName":              honouredNote("containerdrt.TestRuntimeClassRunsThePodUnderItsHandler", "names a `node.k8s.io/v1` RuntimeClass document beside the pod (same source), whose handler the pod runs under, or without one the handler itself: containerd's CRI runtimes and `--runtime-handler`; an unknown one fails the sandbox (`FailedCreatePodSandBox`), as on the kubelet"),
		"enableServiceLinks":            noEffect("there are no Services without an apiserver, so no service variables to add"),
		"preemptionPolicy":              noEffect(reasonScheduling),
		"overhead":                      honouredNote("containerdrt.TestRuntimeClassOverheadSizesThePodCgroup", "set from the RuntimeClass's `overhead.podFixed`, as an apiserver's admission sets it, and added to the pod cgroup's limits and requests as the kubelet adds it; a manifest's own overhead is refused unless its RuntimeClass sets the same"),
		"topologySpreadConstraints":     noEffect(reasonOneNode),
		"setHostnameAsFQDN":             refusedWhen("`true`", msgHostnameFQDN),
		"os":                            refusedWhen("`name: windows`", msgWindows),
		"hostUsers":                     honouredNote("containerdrt.TestUserNamespacePodMapsItsIDs", noteHostUsers),
		"schedulingGates":               refused(msgSchedulingGates),
		"resourceClaims":                refused(msgResourceClaims),
		"resources":                     honouredNote("containerdrt.TestPodCgroupLimitsFromPodResources", "cpu and memory size the pod's cgroup, and cap a container without a limit of its own; huge pages are refused: "+msgPodHugePages),
		"hostnameOverride":              honoured("containerdrt/poddir.TestContainerHostname"),
		"schedulingGroup":               noEffect(reasonScheduling),
		"evictionResponders":            noEffect("called by the apiserver's Eviction API, which static pods do not have"),
	},
	"LocalObjectReference": {
		"name": honoured("e2e.TestOncePullsWithPullSecretBesideThePod"),
	},
	"HostAlias": {
		"ip":        honoured("containerdrt/poddir.TestHostsFilePodNetwork"),
		"hostnames": honoured("containerdrt/poddir.TestHostsFilePodNetwork"),
	},
	"PodDNSConfig": {
		"nameservers": honoured("containerdrt/poddir.TestResolvConf"),
		"searches":    honoured("containerdrt/poddir.TestResolvConfSearchLimits"),
		"options":     honoured("containerdrt/poddir.TestResolvConf"),
	},
	"PodDNSConfigOption": {
		"name":  honoured("containerdrt/poddir.TestResolvConf"),
		"value": honoured("containerdrt/poddir.TestResolvConf"),
	},
}
