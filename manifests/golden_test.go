package manifests

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const goldenNode = "Node1" // upper case on purpose: static names lower-case it

// TestLoadGolden loads every manifest under testdata/manifests and compares what Load
// reports (pods with their UIDs, errors, warnings) with the .golden file beside it. The
// golden files live under testdata/golden, apart from the manifests, so that a directory
// of test manifests stays a valid manifest directory. The UIDs in them pin the hash scheme: if one changes, every pod on every
// upgraded machine would restart.
func TestLoadGolden(t *testing.T) {
	for _, dir := range []string{"valid", "invalid"} {
		files, err := filepath.Glob(filepath.Join("..", "testdata", "manifests", dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			t.Run(dir+"/"+filepath.Base(path), func(t *testing.T) {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				src := Source{Kind: SourceFile, Location: filepath.Base(path)}
				res := Load(data, Options{NodeName: goldenNode, Source: src})
				res.CheckReferences(res.Objects()) // each file a source of its own, as a URL's body
				if dir == "valid" && len(res.Errors) > 0 {
					t.Errorf("valid manifest has errors: %v", res.Errors)
				}
				if dir == "invalid" && len(res.Errors) == 0 {
					t.Errorf("invalid manifest has no errors")
				}
				compareGolden(t, filepath.Join("..", "testdata", "golden", "manifests", dir, filepath.Base(path)+".golden"), summarize(res))
			})
		}
	}
}

// summarize renders a Result as the lines a golden file holds.
func summarize(res Result) string {
	var b strings.Builder
	for _, p := range res.Pods {
		fmt.Fprintf(&b, "pod %s/%s uid=%s\n", p.Namespace, p.Name, p.UID)
		for _, c := range p.Spec.InitContainers {
			fmt.Fprintf(&b, "  init %s hash=%s\n", c.Name, ContainerHash(&c))
		}
		for _, c := range p.Spec.Containers {
			fmt.Fprintf(&b, "  container %s hash=%s\n", c.Name, ContainerHash(&c))
		}
	}
	for _, cm := range res.ConfigMaps {
		fmt.Fprintf(&b, "configmap %s/%s keys=%d\n", cm.Namespace, cm.Name, len(cm.Data)+len(cm.BinaryData))
	}
	for _, s := range res.Secrets {
		fmt.Fprintf(&b, "secret %s/%s type=%s keys=%d\n", s.Namespace, s.Name, s.Type, len(s.Data))
	}
	for _, e := range res.Errors {
		fmt.Fprintf(&b, "error: %s\n", e.Error())
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w.Error())
	}
	return b.String()
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test ./manifests -run Golden -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}
