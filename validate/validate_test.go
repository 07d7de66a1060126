package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestValidateRefusesUnimplementedFieldsInEveryFile checks that `validate` reports a
// field staticpod does not implement in each file that sets one, at the field, with why
// and what to do instead, and exits invalid.
func TestValidateRefusesUnimplementedFieldsInEveryFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"gated.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: gated}\nspec:\n  readinessGates: [{conditionType: example.com/ready}]\n" +
			"  containers: [{name: c, image: busybox:1.36}]\n",
		"userns.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: userns}\nspec:\n  hostUsers: false\n" +
			"  volumes: [{name: data, hostPath: {path: /srv}}]\n" +
			"  containers: [{name: c, image: busybox:1.36, securityContext: {procMount: Unmasked}, volumeMounts: [{name: data, mountPath: /data}]}]\n",
		"fine.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: fine}\nspec:\n  containers: [{name: c, image: busybox:1.36}]\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	var exit error
	app := &cli.App{
		Name: "staticpod", Writer: &out, ErrWriter: &out, Commands: []*cli.Command{Command()},
		ExitErrHandler: func(_ *cli.Context, err error) { exit = err },
	}
	if err := app.Run([]string{"staticpod", "validate", "--hostname-override", "node1", dir}); err == nil || exit == nil {
		t.Fatalf("validate with refused fields succeeded:\n%s", out.String())
	}
	for _, want := range []string{
		"error: " + dir + "/gated.yaml: spec.readinessGates: Forbidden: readiness gates are set by controllers through an apiserver",
		"error: " + dir + "/userns.yaml: spec.volumes[0].hostPath: Forbidden: a pod with hostUsers: false sees its volumes through its user namespace, and staticpod maps only the volumes whose files it writes itself",
		"checked 3 files: 1 pod valid, 2 files invalid; 2 errors",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestValidateReportsForbiddenSysctls checks that `validate` reports a sysctl the daemon
// would not admit (neither safe nor allowed by --allowed-unsafe-sysctls) at its field,
// and takes the flag's patterns.
func TestValidateReportsForbiddenSysctls(t *testing.T) {
	dir := t.TempDir()
	pod := func(name, sysctls string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  securityContext: {sysctls: " + sysctls + "}\n" +
			"  containers: [{name: c, image: busybox:1.36}]\n"
	}
	files := map[string]string{
		"safe.yaml":    pod("safe", `[{name: net.ipv4.ip_unprivileged_port_start, value: "80"}]`),
		"allowed.yaml": pod("allowed", `[{name: kernel.msgmax, value: "65536"}]`),
		"unsafe.yaml":  pod("unsafe", `[{name: kernel.shm_rmid_forced, value: "1"}, {name: net.core.somaxconn, value: "1024"}]`),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	app := &cli.App{
		Name: "staticpod", Writer: &out, ErrWriter: &out, Commands: []*cli.Command{Command()},
		ExitErrHandler: func(*cli.Context, error) {},
	}
	if err := app.Run([]string{"staticpod", "validate", "--hostname-override", "node1", "--allowed-unsafe-sysctls", "kernel.msg*", dir}); err == nil {
		t.Fatalf("validate with a forbidden sysctl succeeded:\n%s", out.String())
	}
	want := "error: " + dir + `/unsafe.yaml: spec.securityContext.sysctls[1]: forbidden sysctl: "net.core.somaxconn" not allowlisted (--allowed-unsafe-sysctls)` + "\n"
	if !strings.Contains(out.String(), want) || strings.Count(out.String(), "error: ") != 1 {
		t.Errorf("validate output, want one error %q:\n%s", want, out.String())
	}
}

// TestValidateTellsWhichPodsANodeRuns checks that `validate --node-labels --node-name`
// reports the pods whose nodeSelector or required node affinity the node's labels do
// not match as refused, with the kubelet's reason, and that they leave the files valid.
func TestValidateTellsWhichPodsANodeRuns(t *testing.T) {
	dir := t.TempDir()
	pod := func(name, spec string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n" + spec + "  containers: [{name: c, image: busybox:1.36}]\n"
	}
	files := map[string]string{
		"camera.yaml": pod("camera", "  nodeSelector: {device: camera}\n"),
		"gate.yaml":   pod("gate", "  nodeSelector: {device: gate}\n"),
		"north.yaml": pod("north", "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "+
			"[{matchExpressions: [{key: site, operator: In, values: [north]}]}]}}}\n"),
		"here.yaml": pod("here", "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "+
			"[{matchFields: [{key: metadata.name, operator: In, values: [cam-7]}]}]}}}\n"),
		"all.yaml": pod("all", ""),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	app := &cli.App{Name: "staticpod", Writer: &out, ErrWriter: &out, Commands: []*cli.Command{Command()}}
	if err := app.Run([]string{"staticpod", "validate", "--node-name", "cam-7", "--node-labels", "device=camera,site=south", dir}); err != nil {
		t.Fatalf("validate: %v\n%s", err, out.String())
	}
	want := "refused: " + dir + "/gate.yaml: default/gate-cam-7: NodeAffinity: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector\n" +
		"refused: " + dir + "/north.yaml: default/north-cam-7: NodeAffinity: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector\n" +
		"checked 5 files: 5 pods valid, 0 files invalid; 0 errors, 0 warnings\n" +
		"node cam-7 refuses 2 pods of 5 pods\n"
	if out.String() != want {
		t.Errorf("validate output:\n%s\nwant:\n%s", out.String(), want)
	}
}
