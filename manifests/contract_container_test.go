package manifests

// The field contract of containers: their process, environment, resources, mounts and
// security context (see contract_table_test.go). A Container rule holds for containers and init
// containers alike; the API's own rules (no probes on init containers, say) still apply.

// noteAppArmor and reasonSELinux say how staticpod, like a kubelet on containerd,
// treats the two LSMs.
const (
	noteAppArmor = "as the kubelet with containerd: where AppArmor is enabled, RuntimeDefault (and no profile at all, on an unprivileged container) runs under containerd's default profile cri-containerd.apparmor.d, loaded with apparmor_parser, and Localhost under the named profile, which must be loaded (else the container fails to start and is retried); " +
		"the deprecated annotation container.apparmor.security.beta.kubernetes.io/<container> is read where the container has no field; " +
		"a pod that asks for any profile but Unconfined on a host without AppArmor is refused at admission (reason AppArmor); `make vm-test` proves the enforcement"
	reasonSELinux = "as on a kubelet with containerd, whose CRI applies SELinux labels only with enable_selinux = true (false by default) on a host with SELinux: staticpod applies none, on any host; " +
		"a level containerd would refuse to create the container with is refused"
)

var containerRules = map[string]map[string]rule{
	"Container": {
		"name":                     honoured("e2e.TestRunFollowsTheManifestDirectory"),
		"image":                    honoured("containerdrt/images.TestPulledImageRuns"),
		"command":                  honoured("containerdrt.TestSpecProcessInContainer"),
		"args":                     honoured("containerdrt.TestSpecProcessInContainer"),
		"workingDir":               honoured("containerdrt.TestSpecProcessInContainer"),
		"ports":                    honoured("e2e.TestPodNetwork"),
		"envFrom":                  honoured("containerdrt/spec.TestObjectEnv"),
		"env":                      honoured("containerdrt.TestSpecProcessInContainer"),
		"resources":                honoured("containerdrt.TestSpecResourcesInContainer"),
		"resizePolicy":             noEffect("resources change only by editing the manifest, which replaces the container; nothing resizes a running one"),
		"restartPolicy":            honoured("e2e.TestInitContainersSidecarsAndHooks"),
		"restartPolicyRules":       refused(msgRestartRules),
		"volumeMounts":             honoured("containerdrt.TestMountsHostPathInContainer"),
		"volumeDevices":            refused(msgVolumeDevices),
		"livenessProbe":            honoured("e2e.TestLivenessProbeRestarts"),
		"readinessProbe":           honoured("e2e.TestReadinessProbeFollowsHTTP"),
		"startupProbe":             honoured("e2e.TestStartupProbeProtectsSlowStarters"),
		"lifecycle":                honoured("e2e.TestInitContainersSidecarsAndHooks"),
		"terminationMessagePath":   honoured("containerdrt.TestMountsTerminationMessageInContainer"),
		"terminationMessagePolicy": honoured("containerdrt.TestTerminationMessageFallsBackToLogs"),
		"imagePullPolicy":          honoured("containerdrt/images.TestEnsureIfNotPresentPullsOnce"),
		"securityContext":          honoured("containerdrt.TestSpecUserInContainer"),
		"stdin":                    refusedWhen("`true`", msgStdin),
		"stdinOnce":                noEffect("only matters with stdin, which is refused"),
		"tty":                      honoured("containerdrt/spec.TestProcessWorkingDirTerminalRlimits"),
	},
	"ContainerPort": {
		"name":          honoured("e2e.TestReadinessProbeFollowsHTTP"),
		"hostPort":      honoured("e2e.TestPodNetwork"),
		"containerPort": honoured("e2e.TestPodNetwork"),
		"protocol":      honoured("containerdrt/podnet.TestPortMappings"),
		"hostIP":        honoured("containerdrt/podnet.TestPortMappings"),
	},
	"EnvFromSource": {
		"prefix":       honoured("containerdrt/spec.TestObjectEnv"),
		"configMapRef": honoured("containerdrt/spec.TestObjectEnv"),
		"secretRef":    honoured("containerdrt/spec.TestObjectEnv"),
	},
	"ConfigMapEnvSource": {
		"name":     honoured("containerdrt/spec.TestObjectEnv"),
		"optional": honoured("containerdrt/spec.TestObjectEnv"),
	},
	"SecretEnvSource": {
		"name":     honoured("containerdrt/spec.TestObjectEnv"),
		"optional": honoured("containerdrt/spec.TestObjectEnv"),
	},
	"EnvVar": {
		"name":      honoured("containerdrt.TestSpecProcessInContainer"),
		"value":     honoured("containerdrt.TestSpecProcessInContainer"),
		"valueFrom": honoured("containerdrt/spec.TestDownwardEnv"),
	},
	"EnvVarSource": {
		"fieldRef":         honoured("containerdrt/spec.TestDownwardEnv"),
		"resourceFieldRef": honoured("containerdrt/spec.TestDownwardEnv"),
		"configMapKeyRef":  honoured("containerdrt/spec.TestObjectEnv"),
		"secretKeyRef":     honoured("containerdrt/spec.TestObjectEnv"),
		"fileKeyRef":       refused(envAdvice["fileKeyRef"]),
	},
	"ConfigMapKeySelector": {
		"name":     honoured("containerdrt/spec.TestObjectEnv"),
		"key":      honoured("containerdrt/spec.TestObjectEnv"),
		"optional": honoured("containerdrt/spec.TestObjectEnv"),
	},
	"SecretKeySelector": {
		"name":     honoured("containerdrt/spec.TestObjectEnv"),
		"key":      honoured("containerdrt/spec.TestObjectEnv"),
		"optional": honoured("containerdrt/spec.TestObjectEnv"),
	},
	"ObjectFieldSelector": {
		"apiVersion": honouredNote("manifests.TestValidateEnv", "only `v1`"),
		"fieldPath":  honoured("containerdrt/spec.TestDownwardEnv"),
	},
	"ResourceFieldSelector": {
		"containerName": honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"resource":      honoured("containerdrt/poddir.TestDownwardAPIFiles"),
		"divisor":       honoured("containerdrt/poddir.TestDownwardAPIFiles"),
	},
	"ResourceRequirements": {
		"limits":   honoured("containerdrt.TestSpecResourcesInContainer"),
		"requests": honoured("containerdrt.TestSpecResourcesInContainer"),
		"claims":   refused(msgResourceClaims),
	},
	"VolumeMount": {
		"name":              honoured("containerdrt.TestMountsHostPathInContainer"),
		"readOnly":          honoured("containerdrt.TestMountsHostPathInContainer"),
		"recursiveReadOnly": honouredNote("containerdrt.TestMountsRecursiveReadOnlyInContainer", "`Enabled` needs runc >= 1.1 and a kernel >= 5.12 (mount_setattr), else the container fails to start; `IfPossible` is a plain read-only bind"),
		"mountPath":         honoured("containerdrt.TestMountsHostPathInContainer"),
		"subPath":           honoured("containerdrt.TestMountsSubPathInContainer"),
		"mountPropagation":  honoured("containerdrt/poddir.TestMountPropagation"),
		"subPathExpr":       honoured("containerdrt/poddir.TestSubPathExpr"),
		"bindMountOptions":  refused(msgAlpha(gateBindMountOpts)),
	},
}

var securityRules = map[string]map[string]rule{
	"PodSecurityContext": {
		"seLinuxOptions":           noEffect(reasonSELinux),
		"windowsOptions":           noEffect(reasonWindows),
		"runAsUser":                honoured("containerdrt.TestSpecUserInContainer"),
		"runAsGroup":               honoured("containerdrt.TestSpecUserInContainer"),
		"runAsNonRoot":             honoured("containerdrt/spec.TestSecurityRunAsNonRoot"),
		"supplementalGroups":       honoured("containerdrt.TestSpecUserInContainer"),
		"supplementalGroupsPolicy": honoured("containerdrt/spec.TestSecurityUser"),
		"fsGroup":                  honouredNote("containerdrt.TestSpecUserInContainer", "a supplementary group of every container, and the group of configMap, secret, downwardAPI and projected files; emptyDir volumes are not yet given to it"),
		"sysctls":                  honouredNote("containerdrt.TestSysctlsInContainer", "the kubelet's safe sysctls of the kernel, others only where `--allowed-unsafe-sysctls` allows them; a pod with any other is not run: Failed, reason SysctlForbidden (runner.TestForbiddenSysctlFailsThePod)"),
		"fsGroupChangePolicy":      noEffect("staticpod writes the files that take fsGroup anew, with that group, and changes the ownership of nothing else"),
		"seccompProfile":           honoured("containerdrt.TestSpecSeccompInContainer"),
		"appArmorProfile":          honouredNote("e2e.TestAppArmorRefusedWithoutAppArmor", noteAppArmor),
		"seLinuxChangePolicy":      noEffect("staticpod applies no SELinux label (seLinuxOptions has no effect) and relabels no volume"),
	},
	"Sysctl": {
		"name":  honoured("containerdrt.TestSysctlsInContainer"),
		"value": honoured("containerdrt.TestSysctlsInContainer"),
	},
	"SecurityContext": {
		"capabilities":             honoured("containerdrt.TestSpecCapabilitiesInContainer"),
		"privileged":               honoured("containerdrt.TestSpecPrivilegedInContainer"),
		"seLinuxOptions":           noEffect(reasonSELinux),
		"windowsOptions":           noEffect(reasonWindows),
		"runAsUser":                honoured("containerdrt.TestSpecUserInContainer"),
		"runAsGroup":               honoured("containerdrt.TestSpecUserInContainer"),
		"runAsNonRoot":             honoured("containerdrt/spec.TestSecurityRunAsNonRoot"),
		"readOnlyRootFilesystem":   honoured("containerdrt.TestSpecReadOnlyRootInContainer"),
		"allowPrivilegeEscalation": honoured("containerdrt.TestSpecNoNewPrivsInContainer"),
		"procMount":                honoured("containerdrt.TestProcMountUnmaskedHasNoMasks"),
		"seccompProfile":           honoured("containerdrt.TestSpecSeccompInContainer"),
		"appArmorProfile":          honouredNote("e2e.TestAppArmorRefusedWithoutAppArmor", noteAppArmor),
	},
	"AppArmorProfile": {
		"type":             honoured("containerdrt.TestAppArmorProfileOfContainer"),
		"localhostProfile": honoured("containerdrt.TestAppArmorProfileOfContainer"),
	},
	"Capabilities": {
		"add":  honoured("containerdrt.TestSpecCapabilitiesInContainer"),
		"drop": honoured("containerdrt.TestSpecCapabilitiesInContainer"),
	},
	"SeccompProfile": {
		"type":             honoured("containerdrt.TestSpecSeccompInContainer"),
		"localhostProfile": honoured("containerdrt.TestSpecSeccompInContainer"),
	},
}
