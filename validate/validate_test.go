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
			"  securityContext: {sysctls: [{name: net.core.somaxconn, value: \"1024\"}]}\n" +
			"  containers: [{name: c, image: busybox:1.36}]\n",
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
		"error: " + dir + "/userns.yaml: spec.hostUsers: Forbidden: user namespaces are not implemented by staticpod",
		"error: " + dir + "/userns.yaml: spec.securityContext.sysctls: Forbidden: sysctls are not applied by staticpod",
		"checked 3 files: 1 pod valid, 2 files invalid; 3 errors",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out.String())
		}
	}
}
