package manifests

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes through the whole pipeline (decode, default, validate,
// identify). It must never panic, and every problem it reports must be printable.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "manifests", "*", "*"))
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("apiVersion: v1\nkind: PodList\nitems: [null, 1, {kind: Pod}]\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		res := Load(data, Options{NodeName: "node", Source: Source{Kind: SourceFile, Location: "fuzz.yaml"}})
		for _, p := range append(res.Errors, res.Warnings...) {
			if p.Error() == "" {
				t.Fatalf("empty problem %+v", p)
			}
		}
		for _, pod := range res.Pods {
			if pod.UID == "" || pod.Name == "" {
				t.Fatalf("pod without identity: %+v", pod.ObjectMeta)
			}
		}
	})
}
