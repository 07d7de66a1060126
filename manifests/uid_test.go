package manifests

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestCheckUIDRefusesWhatIsNotAPlainToken(t *testing.T) {
	for _, tc := range []struct {
		uid  types.UID
		want bool // accepted
	}{
		{"3f5b3a0e-8a3c-4f57-9d7e-2b8e0c1d9a11", true}, // kubectl get -o yaml
		{"6a21deec109f678a0fe1573329f0d9f7", true},     // staticpod's own, the kubelet's md5
		{"0f9b7c1e-job-uid-given", true},
		{"Web.v2", true},
		{types.UID(strings.Repeat("f", MaxUIDLength)), true},
		{types.UID(strings.Repeat("f", MaxUIDLength+1)), false},
		{"", false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"-x", false},
		{"aaaaaaaa/../../../../../etc", false},
		{"a/b", false},
		{"*", false},
		{"a?", false},
		{"a[b]", false},
		{`a\b`, false},
		{"a_b", false}, // the log dir's separator; and '-' is '_' in a systemd slice
		{"a=b;c", false},
		{"a b", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"é", false},
	} {
		if err := CheckUID(tc.uid); (err == nil) != tc.want {
			t.Errorf("CheckUID(%q) = %v, want accepted %v", tc.uid, err, tc.want)
		}
	}
}

func TestLoadRefusesTwoPodsOfOneUID(t *testing.T) {
	data := `apiVersion: v1
kind: Pod
metadata: {name: a, uid: 3f5b3a0e-8a3c-4f57-9d7e-2b8e0c1d9a11}
spec: {containers: [{name: c, image: busybox:1.36}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, uid: 3f5b3a0e-8a3c-4f57-9d7e-2b8e0c1d9a11}
spec: {containers: [{name: c, image: busybox:1.36}]}
`
	res := Load([]byte(data), Options{NodeName: "n", Source: Source{Kind: SourceFile, Location: "twins.yaml"}})
	if len(res.Pods) != 1 || res.Pods[0].Name != "a-n" {
		t.Errorf("pods = %d, want only the first (a-n)", len(res.Pods))
	}
	if len(res.Errors) != 1 || res.Errors[0].Field() != "metadata.uid" || res.Errors[0].Doc != 2 {
		t.Errorf("errors = %v, want one Duplicate at metadata.uid of document 2", res.Errors)
	}
}

// plainUIDReference is plainUID's rule as the regular expression it is checked by hand
// for: the two must agree on every string.
var plainUIDReference = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*$`)

func FuzzPlainUIDAgreesWithItsExpression(f *testing.F) {
	for _, s := range []string{
		"", "a", "Z", "0", ".", "..", "-", "-a", ".a", "a.", "a-", "a..b", "a/b", "a_b", "a b", "a\n",
		"a\x00", "é", "aé", "0f8fad5b-d9cb-469f-a165-70867728950e", "a*", "a?", "[a]", "a=b;c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := plainUID(s), plainUIDReference.MatchString(s); got != want {
			t.Errorf("plainUID(%q) = %v, the expression says %v", s, got, want)
		}
	})
}
