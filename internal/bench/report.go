// Package bench measures staticpod against the floor that containerd sets on the same
// machine in the same run: how fast pods start, restart and stop, how much the daemon
// costs while it waits, how long a relist takes, how long a cold start with 100 pods
// takes, and the footprint a user measures (the PSS of the daemon, its shims and their
// helpers). Every figure is the min, median and max over repeats, and where a floor
// exists, the median's ratio to the floor's median. The program in cmd/staticpod-bench
// runs it and writes BENCH.md and a JSON file that a later run is compared with.
//
// It is one of the few packages that import containerd's: its floors are containerd
// alone and its clock is containerd's events. It uses containerdrt only as an observer
// (a Runtime with Config.Observe, for the relist's figures) and internal/testenv for
// its private containerd and image; nothing but its command imports it.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
)

// Row is one measured figure.
type Row struct {
	ID      string    `json:"id"`   // stable key across runs, e.g. "start/net=pod/pods=20"
	Work    string    `json:"work"` // what was measured, for people
	Unit    string    `json:"unit"` // of the samples: ms, %, MiB, allocs, µs
	Samples []float64 `json:"samples"`
	Min     float64   `json:"min"`
	Median  float64   `json:"median"`
	Max     float64   `json:"max"`

	Floor     float64 `json:"floor,omitempty"`      // median of the floor's samples, in Unit
	FloorWork string  `json:"floor_work,omitempty"` // what the floor is
	Ratio     float64 `json:"ratio,omitempty"`      // Median / Floor

	Target Target `json:"target,omitzero"`
	Met    *bool  `json:"met,omitempty"` // nil where there is no target
	Note   string `json:"note,omitempty"`
}

// Target is what a row must reach: its ratio to the floor, or its median, at most Max.
type Target struct {
	Ratio bool    `json:"ratio,omitempty"` // Max bounds Ratio, else Median
	Max   float64 `json:"max"`
}

func (t Target) String() string {
	if t.Max == 0 {
		return ""
	}
	if t.Ratio {
		return fmt.Sprintf("≤ %.2f×", t.Max)
	}
	return fmt.Sprintf("≤ %s", trim(t.Max))
}

// NewRow summarises samples. A floor's samples, when given, are summarised by their
// median, and the row's median is compared with it.
func NewRow(id, work, unit string, samples []float64) Row {
	r := Row{ID: id, Work: work, Unit: unit, Samples: samples}
	if len(samples) == 0 {
		return r
	}
	sorted := slices.Sorted(slices.Values(samples))
	r.Min, r.Max, r.Median = sorted[0], sorted[len(sorted)-1], Median(sorted)
	return r
}

// Against sets the row's floor, the median of floor's samples, and the ratio to it.
func (r Row) Against(what string, floor []float64) Row {
	if len(floor) == 0 {
		return r
	}
	r.FloorWork, r.Floor = what, Median(floor)
	if r.Floor > 0 {
		r.Ratio = r.Median / r.Floor
	}
	return r
}

// Want sets the row's target and whether the row meets it.
func (r Row) Want(t Target) Row {
	r.Target = t
	got := r.Median
	if t.Ratio {
		got = r.Ratio
	}
	met := len(r.Samples) > 0 && got <= t.Max
	r.Met = &met
	return r
}

// Noted adds a note to the row.
func (r Row) Noted(format string, args ...any) Row {
	note := fmt.Sprintf(format, args...)
	if r.Note != "" {
		note = r.Note + "; " + note
	}
	r.Note = note
	return r
}

// Median is the middle of the samples (the mean of the two middle ones for an even
// count).
func Median(samples []float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(samples))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Report is one run of the benchmarks.
type Report struct {
	Date     string            `json:"date"`
	Machine  map[string]string `json:"machine"`  // cpus, memory, kernel, cgroup
	Versions map[string]string `json:"versions"` // staticpod, containerd, runc, go
	Duration string            `json:"duration"` // of the whole run
	Rows     []Row             `json:"rows"`

	mu sync.Mutex // guards Rows while benchmarks run side by side
}

// Add appends rows.
func (rep *Report) Add(rows ...Row) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	rep.Rows = append(rep.Rows, rows...)
}

// WriteJSON writes the report to path.
func (rep *Report) WriteJSON(path string) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadReport reads a report WriteJSON wrote.
func ReadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// WriteMarkdown writes the report as BENCH.md's text: the machine, the versions, then
// one table of every row.
func (rep *Report) WriteMarkdown(w io.Writer, command string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# staticpod benchmarks\n\nWritten by `%s` on %s in %s. Every figure is min / median / max over the samples; a ratio is the median's to the floor's median, the floor measured in the same run on the same containerd. Lower is better everywhere.\n\n", command, rep.Date, rep.Duration)
	b.WriteString("| machine | |\n| --- | --- |\n")
	for _, k := range slices.Sorted(maps.Keys(rep.Machine)) {
		fmt.Fprintf(&b, "| %s | %s |\n", k, rep.Machine[k])
	}
	for _, k := range slices.Sorted(maps.Keys(rep.Versions)) {
		fmt.Fprintf(&b, "| %s | %s |\n", k, rep.Versions[k])
	}
	b.WriteString("\n| work | n | min | median | max | floor | ratio | target | met |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rep.Rows {
		floor, ratio := "", ""
		if r.FloorWork != "" {
			floor = fmt.Sprintf("%s %s (%s)", trim(r.Floor), r.Unit, r.FloorWork)
			ratio = fmt.Sprintf("%.2f×", r.Ratio)
		}
		met := ""
		if r.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*r.Met]
		}
		work := r.Work
		if r.Note != "" {
			work += " (" + r.Note + ")"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s %s | %s | %s | %s | %s | %s |\n",
			work, len(r.Samples), trim(r.Min), trim(r.Median), r.Unit, trim(r.Max), floor, ratio, r.Target, met)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Regression is a row whose median grew beyond the tolerance since a base run.
type Regression struct {
	ID         string
	Base, Now  float64
	Unit       string
	Worse      float64 // Now/Base
	RatioBased bool    // compared by ratio to the floor, which the machine's speed cancels
}

// Compare returns the rows of now that are worse than in base by more than tolerance
// (0.1: 10 %), and the IDs of base's rows that now lacks. Rows with a floor are
// compared by their ratio, so that a faster or slower machine does not count; the
// others by their median.
func Compare(base, now *Report, tolerance float64) (worse []Regression, missing []string) {
	cur := map[string]Row{}
	for _, r := range now.Rows {
		cur[r.ID] = r
	}
	for _, b := range base.Rows {
		n, ok := cur[b.ID]
		if !ok {
			missing = append(missing, b.ID)
			continue
		}
		old, got, byRatio := b.Median, n.Median, false
		if b.Ratio > 0 && n.Ratio > 0 {
			old, got, byRatio = b.Ratio, n.Ratio, true
		}
		if old <= 0 || math.IsNaN(old) || math.IsNaN(got) {
			continue
		}
		if got > old*(1+tolerance) {
			worse = append(worse, Regression{ID: b.ID, Base: old, Now: got, Unit: n.Unit, Worse: got / old, RatioBased: byRatio})
		}
	}
	return worse, missing
}

// trim formats a figure with three significant digits.
func trim(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
