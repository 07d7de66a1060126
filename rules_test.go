package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/staticpod/staticpod/internal/testenv"
)

// The alerting rules shipped for Prometheus, and their unit tests.
const (
	rulesDir   = "contrib/prometheus"
	rulesFile  = "staticpod-rules.yaml"
	rulesTests = "staticpod-rules.test.yaml"
)

// TestAlertRulesPassPromtool checks the alerting rules with `promtool check rules` and
// runs their unit tests, which fire each alert and show it silent where it must be.
func TestAlertRulesPassPromtool(t *testing.T) {
	bin := testenv.Promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTests}} {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s in %s: %v\n%s", strings.Join(args, " "), rulesDir, err, out)
		}
	}
}

// TestAlertRulesUseDocumentedMetrics checks that every staticpod metric the rules
// read is one of the metrics docs/reference.md lists as served on /metrics (a
// histogram's _count, _sum and _bucket series by the histogram's name): a renamed
// metric must not leave an alert that can never fire.
func TestAlertRulesUseDocumentedMetrics(t *testing.T) {
	rules, err := os.ReadFile(rulesDir + "/" + rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile("docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(staticpod_[a-z_]+)` \\|").FindAllStringSubmatch(string(ref), -1) {
		documented[m[1]] = true
	}
	used := regexp.MustCompile(`staticpod_[a-z_]+`).FindAllString(string(rules), -1)
	if len(used) == 0 {
		t.Fatalf("%s reads no staticpod metric", rulesFile)
	}
	for _, name := range used {
		base := name
		for _, suffix := range []string{"_count", "_sum", "_bucket"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && documented[b] {
				base = b
			}
		}
		if !documented[base] {
			t.Errorf("%s reads %s, which docs/reference.md's metrics table does not list", rulesFile, name)
		}
	}
}
