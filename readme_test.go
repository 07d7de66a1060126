package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// updateREADME rewrites the README's benchmark table from BENCH.json instead of
// checking it: go test -run TestREADMENumbersAreBENCHJSONs . -update-readme
var updateREADME = flag.Bool("update-readme", false, "rewrite README.md's benchmark table from BENCH.json")

// The README's benchmark table lies between these lines.
const (
	benchBegin = "<!-- BENCH.json: begin; written by go test -run TestREADMENumbersAreBENCHJSONs . -update-readme -->"
	benchEnd   = "<!-- BENCH.json: end -->"
)

// headline are the rows of BENCH.json the README shows, by id, with their words.
var headline = []struct{ id, work string }{
	{"start/net=host/pods=1", "1 pod on the host network: manifest written → running"},
	{"start/net=pod/pods=1", "1 pod with its own network"},
	{"start/net=pod/pods=20", "20 pods (own network) written at once → all running"},
	{"start/net=pod/pods=100", "100 pods (own network) at once"},
	{"same/net=pod/pods=20", "20 pods (own network) at once, beside 20 running, against the same containers"},
	{"present/pods=20", "staticpod started with 20 manifests present → all running"},
	{"remove/net=pod/exited", "manifest removed → app exited on SIGTERM"},
	{"restart/first/net=pod/exit-event", "SIGKILL of a container → running again"},
	{"cold/pods=100", "staticpod restarted under 100 running pods → all adopted"},
	{"idle/pods=20/cpu", "daemon CPU, idle with 20 pods"},
	{"idle/pods=100/cpu", "daemon CPU, idle with 100 pods"},
	{"footprint/net=bridge/pods=20/total", "memory (PSS) of 20 idle pods: daemon, shims, log writers"},
}

// bench is what the table reads of BENCH.json.
type bench struct {
	Date     string            `json:"date"`
	Machine  map[string]string `json:"machine"`
	Versions map[string]string `json:"versions"`
	Rows     []benchRow        `json:"rows"`
}

type benchRow struct {
	ID        string   `json:"id"`
	Unit      string   `json:"unit"`
	Median    float64  `json:"median"`
	Floor     *float64 `json:"floor"`
	FloorWork string   `json:"floor_work"`
	Ratio     *float64 `json:"ratio"`
	Target    *struct {
		Ratio bool    `json:"ratio"`
		Max   float64 `json:"max"`
	} `json:"target"`
	Met *bool `json:"met"`
}

// figure writes a value in its unit as BENCH.md does, three significant digits, and
// milliseconds from a thousand on as seconds.
func figure(v float64, unit string) string {
	if unit == "ms" && v >= 1000 {
		v, unit = v/1000, "s"
	}
	var s string
	switch {
	case unit == "%":
		s = strconv.FormatFloat(v, 'g', 2, 64)
	case v >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return s + " " + unit
}

// benchTable renders the README's benchmark lines from BENCH.json's content.
func benchTable(data []byte) (string, error) {
	var b bench
	if err := json.Unmarshal(data, &b); err != nil {
		return "", fmt.Errorf("read BENCH.json: %w", err)
	}
	rows := map[string]benchRow{}
	for _, r := range b.Rows {
		rows[r.ID] = r
	}
	var out strings.Builder
	fmt.Fprintf(&out, "The last `make bench` (%s; %s cores, %s, containerd %s, cgroup %s) gave, as medians:\n\n",
		b.Date, b.Machine["cpus"], b.Machine["cpu"], b.Versions["containerd"], b.Machine["cgroup"])
	out.WriteString("| work | staticpod | floor: containerd alone, same run | target |\n| --- | --- | --- | --- |\n")
	for _, h := range headline {
		r, ok := rows[h.id]
		if !ok {
			return "", fmt.Errorf("BENCH.json has no row %s", h.id)
		}
		floor := ""
		if r.Floor != nil && r.Ratio != nil {
			floor = fmt.Sprintf("%s, %s (%.2f×)", figure(*r.Floor, r.Unit), r.FloorWork, *r.Ratio)
		}
		target := ""
		if r.Target != nil {
			if r.Target.Ratio {
				target = fmt.Sprintf("≤ %.2f×", r.Target.Max)
			} else {
				v, unit := r.Target.Max, r.Unit
				if unit == "ms" && v >= 1000 {
					v, unit = v/1000, "s"
				}
				target = "≤ " + strconv.FormatFloat(v, 'g', -1, 64) + " " + unit
			}
			if r.Met != nil && !*r.Met {
				target += ": **not met**"
			}
		}
		fmt.Fprintf(&out, "| %s | %s | %s | %s |\n", h.work, figure(r.Median, r.Unit), floor, target)
	}
	return out.String(), nil
}

// TestREADMENumbersAreBENCHJSONs checks the README's benchmark table against BENCH.json
// at the same commit, which make bench writes with BENCH.md: a README whose numbers
// are not the last run's fails.
func TestREADMENumbersAreBENCHJSONs(t *testing.T) {
	data, err := os.ReadFile("BENCH.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := benchTable(data)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(readme), benchBegin+"\n")
	got, after, ok2 := strings.Cut(rest, benchEnd)
	if !ok1 || !ok2 {
		t.Fatalf("README.md lacks the lines\n%s\n%s\naround its benchmark table", benchBegin, benchEnd)
	}
	if got == want {
		return
	}
	if *updateREADME {
		if err := os.WriteFile("README.md", []byte(before+benchBegin+"\n"+want+benchEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's benchmark table is not BENCH.json's; write it with\n"+
		"  go test -run TestREADMENumbersAreBENCHJSONs . -update-readme\nIt says:\n%s\nBENCH.json says:\n%s", got, want)
}

// TestREADMEIsShort keeps the README what a new user reads in five minutes; the rest
// belongs in docs/.
func TestREADMEIsShort(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n >= 150 {
		t.Errorf("README.md has %d lines; keep it under 150 and move the rest into docs/", n)
	}
}
