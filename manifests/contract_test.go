package manifests

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is where the packages named by the proofs live, seen from this package.
const repoRoot = ".."

// The docs' "Pod fields" section lies between these markers; everything between them
// is rendered from the contract.
const (
	docsFile       = "docs/reference.md"
	docsBeginTable = "<!-- pod fields: rendered from manifests/contract*.go by `go test ./manifests -run TestFieldContractDocs -update`; do not edit -->\n"
	docsEndTable   = "<!-- end of pod fields -->\n"
)

// TestFieldContractClassifiesEveryField fails when a field of a Pod that staticpod
// reads has no rule (a k8s.io/api upgrade added it), when a rule names a field that no
// longer exists or is no longer reached, and when an honoured field's proof is not a
// test of the repository.
func TestFieldContractClassifiesEveryField(t *testing.T) {
	reached := map[string]map[string]bool{}
	for _, ct := range walkContract() {
		name := ct.typ.Name()
		reached[name] = map[string]bool{}
		for _, f := range ct.fields {
			reached[name][f.name] = true
			if _, ok := contract[name][f.name]; !ok {
				t.Errorf("%s.%s (at %s) has no rule: classify it as honoured, refused or of no effect in manifests/contract*.go", name, f.name, ct.paths[0])
			}
		}
	}
	for typ, fields := range contract {
		for name, r := range fields {
			key := typ + "." + name
			if !reached[typ][name] {
				t.Errorf("%s is classified but no such field is reached from a Pod: remove its rule", key)
				continue
			}
			checkRule(t, key, r)
		}
	}
}

func checkRule(t *testing.T, key string, r rule) {
	t.Helper()
	switch r.verdict {
	case verdictHonoured:
		if !testExists(t, r.proof) {
			t.Errorf("%s: its proof %q is no test of the repository", key, r.proof)
		}
	case verdictRefused, verdictNoEffect:
		if r.text == "" {
			t.Errorf("%s: says neither the message users get nor the reason", key)
		}
	default:
		t.Errorf("%s: has no verdict", key)
	}
}

// testExists says whether proof ("dir.TestName", dir relative to the repository) names
// a test function of that directory.
func testExists(t *testing.T, proof string) bool {
	t.Helper()
	dir, name, ok := cutLast(proof, ".")
	if !ok || !strings.HasPrefix(name, "Test") {
		return false
	}
	files, err := filepath.Glob(filepath.Join(repoRoot, filepath.FromSlash(dir), "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name) + `\(`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if decl.Match(src) {
			return true
		}
	}
	return false
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// TestFieldContractDocs fails when the docs' "Pod fields" table is not the one the
// contract renders; with -update it rewrites the table.
func TestFieldContractDocs(t *testing.T) {
	table, err := fieldTable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(repoRoot, docsFile)
	docs, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := bytes.Cut(docs, []byte(docsBeginTable))
	if !ok {
		t.Fatalf("%s has no line %q", docsFile, docsBeginTable)
	}
	current, after, ok := bytes.Cut(rest, []byte(docsEndTable))
	if !ok {
		t.Fatalf("%s has no line %q after the table", docsFile, docsEndTable)
	}
	if string(current) == table {
		return
	}
	if !*update {
		t.Fatalf("the Pod fields table of %s differs from manifests/contract*.go: run `go test ./manifests -run TestFieldContractDocs -update`", docsFile)
	}
	// A new slice: before and after share docs' array, which appending to before would
	// overwrite.
	out := slices.Concat(before, []byte(docsBeginTable), []byte(table), []byte(docsEndTable), after)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
