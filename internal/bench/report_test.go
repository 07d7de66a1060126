package bench

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRowSummarisesAgainstItsFloor(t *testing.T) {
	r := NewRow("start/x", "a start", "ms", []float64{130, 100, 120, 110}).
		Against("ctr run -d", []float64{90, 110, 100}).
		Want(Target{Ratio: true, Max: 1.05})
	if r.Min != 100 || r.Max != 130 || r.Median != 115 {
		t.Errorf("min/median/max = %v/%v/%v, want 100/115/130", r.Min, r.Median, r.Max)
	}
	if r.Floor != 100 || math.Abs(r.Ratio-1.15) > 1e-9 {
		t.Errorf("floor %v ratio %v, want 100 and 1.15", r.Floor, r.Ratio)
	}
	if r.Met == nil || *r.Met {
		t.Errorf("met = %v, want false: 1.15× is over 1.05×", r.Met)
	}
	byValue := NewRow("idle", "idle", "%", []float64{0.2, 0.4, 0.1}).Want(Target{Max: 0.3})
	if byValue.Met == nil || !*byValue.Met {
		t.Errorf("a median of 0.2 against ≤ 0.3: met = %v, want true", byValue.Met)
	}
	if none := NewRow("e", "empty", "ms", nil).Want(Target{Max: 1}); *none.Met {
		t.Error("a row without samples meets its target")
	}
}

func TestCompareFindsRegressions(t *testing.T) {
	base := &Report{Rows: []Row{
		NewRow("a", "", "ms", []float64{100}).Against("f", []float64{100}),
		NewRow("b", "", "ms", []float64{100}),
		NewRow("c", "", "ms", []float64{100}),
		NewRow("gone", "", "ms", []float64{1}),
	}}
	now := &Report{Rows: []Row{
		// twice the time on a machine twice as slow: the ratio holds, no regression
		NewRow("a", "", "ms", []float64{200}).Against("f", []float64{200}),
		NewRow("b", "", "ms", []float64{125}),
		NewRow("c", "", "ms", []float64{105}),
	}}
	worse, missing := Compare(base, now, 0.10)
	if len(worse) != 1 || worse[0].ID != "b" || worse[0].RatioBased || math.Abs(worse[0].Worse-1.25) > 1e-9 {
		t.Errorf("worse = %+v, want b alone, 1.25× by its median", worse)
	}
	if len(missing) != 1 || missing[0] != "gone" {
		t.Errorf("missing = %v, want [gone]", missing)
	}
}

func TestReportRoundTripsAndRenders(t *testing.T) {
	rep := &Report{Date: "d", Duration: "1m", Machine: map[string]string{"cpus": "2"}, Versions: map[string]string{"containerd": "1.6"}}
	rep.Add(NewRow("start/net=host/pods=1", "1 manifest written → running", "ms", []float64{90, 100, 110}).
		Against("ctr run -d", []float64{100}).Want(Target{Ratio: true, Max: 1.05}).Noted("a note"))
	path := filepath.Join(t.TempDir(), "b.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != 1 || back.Rows[0].Median != 100 || back.Rows[0].Met == nil || !*back.Rows[0].Met {
		t.Fatalf("read back %+v", back.Rows)
	}
	var md bytes.Buffer
	if err := back.WriteMarkdown(&md, "make bench"); err != nil {
		t.Fatal(err)
	}
	want := "| 1 manifest written → running (a note) | 3 | 90.0 | 100 ms | 110 | 100 ms (ctr run -d) | 1.00× | ≤ 1.05× | yes |"
	if !strings.Contains(md.String(), want) {
		t.Errorf("BENCH.md lacks the row\n%s\nin\n%s", want, md.String())
	}
}

func TestPhasesOfAStartSplitItByContainerdsEvents(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	own := []Event{
		{Time: at(5), Namespace: "other", Topic: "/containers/create"},
		{Time: at(10), Namespace: "n", Topic: "/containers/create"},
		{Time: at(25), Namespace: "n", Topic: "/containers/create"},
		{Time: at(60), Namespace: "n", Topic: "/tasks/create"},
		{Time: at(66), Namespace: "n", Topic: "/tasks/start"},
	}
	want := []time.Duration{10 * time.Millisecond, 15 * time.Millisecond, 35 * time.Millisecond, 6 * time.Millisecond}
	if got := phasesOf(own, "n", t0); !slices.Equal(got, want) {
		t.Errorf("own network: phases %v, want %v", got, want)
	}
	host := own[2:] // no sandbox record: its step is part of the container's
	want = []time.Duration{0, 25 * time.Millisecond, 35 * time.Millisecond, 6 * time.Millisecond}
	if got := phasesOf(host, "n", t0); !slices.Equal(got, want) {
		t.Errorf("host network: phases %v, want %v", got, want)
	}
	if got := phasesOf(own[:3], "n", t0); got != nil {
		t.Errorf("a start without a task: phases %v, want none", got)
	}
}
