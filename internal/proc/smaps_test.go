package proc

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A rollup as Linux 6.x writes it: the header line, then "Key: <n> kB" lines.
const rollup = `56057bf47000-7ffc02e73000 ---p 00000000 00:00 0                          [rollup]
Rss:               40020 kB
Pss:               40012 kB
Pss_Dirty:         13240 kB
Pss_Anon:          13240 kB
Pss_File:          26772 kB
Pss_Shmem:             0 kB
Shared_Clean:        136 kB
Anonymous:         13240 kB
SwapPss:               0 kB
`

func TestParseSmapsRollupReadsPSSAndItsParts(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Smaps
		err      bool
	}{
		{name: "linux 6", in: rollup, want: Smaps{RSS: 40020, PSS: 40012, PSSAnon: 13240, PSSFile: 26772}},
		// Before Linux 5.9 there is no Pss_Anon or Pss_File: PSS alone.
		{name: "older kernel", in: "00400000-7ffd ---p 00000000 00:00 0 [rollup]\nRss: 900 kB\nPss: 512 kB\nSwapPss: 3 kB\n", want: Smaps{RSS: 900, PSS: 512}},
		{name: "blank lines", in: "\nPss: 7 kB\n\n", want: Smaps{PSS: 7}},
		{name: "no Pss line", in: "Rss: 900 kB\n", err: true},
		{name: "empty", in: "", err: true},
		{name: "not a number", in: "Pss: lots kB\n", err: true},
		{name: "another unit", in: "Pss: 5 MB\n", err: true},
	} {
		got, err := ParseSmapsRollup(strings.NewReader(tc.in))
		if (err != nil) != tc.err {
			t.Errorf("%s: ParseSmapsRollup error %v, want error %t", tc.name, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: ParseSmapsRollup (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestSmapsRollupOfThisProcess(t *testing.T) {
	s, err := SmapsRollup(Root, os.Getpid())
	if err != nil || s.PSS <= 0 || s.RSS < s.PSS {
		t.Errorf("SmapsRollup(self) = %+v, %v; want a PSS above 0 and at most the RSS", s, err)
	}
	if _, err := SmapsRollup(Root, -1); err == nil {
		t.Error("SmapsRollup(-1): no error, want one: no such process")
	}
}
