// Command staticpod-bench measures staticpod against containerd's floor on this
// machine (see package bench) and writes BENCH.md and BENCH.json; with -base it
// compares a run's JSON with an earlier one's instead and lists the regressions.
//
//	staticpod-bench -staticpod bin/staticpod [-quick] [-md BENCH.md] [-json BENCH.json]
//	staticpod-bench -base old.json [-json BENCH.json] [-tolerance 0.1]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/staticpod/staticpod/internal/bench"
)

func main() {
	binary := flag.String("staticpod", "bin/staticpod", "staticpod binary, built by make build")
	md := flag.String("md", "BENCH.md", "where the report goes")
	jsonPath := flag.String("json", "BENCH.json", "where the figures go (or, with -base, the run to compare)")
	quick := flag.Bool("quick", false, "fewer repeats and 10 s idle windows: to try the program, not for figures")
	base := flag.String("base", "", "compare -json with this earlier run's JSON instead of measuring")
	tolerance := flag.Float64("tolerance", 0.10, "with -base: how much worse a figure may be before it counts")
	only := flag.String("only", "", "run only these steps (comma-separated): floors, start, present, removal, restart, steady, network, crun, footprint")
	var flags flagList
	profile := flag.String("profile", "", "a directory for CPU profiles of staticpod and containerd over one more 100-pod burst")
	flag.Var(&flags, "staticpod-flag", "a flag for every staticpod the run starts (repeatable), e.g. --log-level=debug")
	flag.Parse()
	log.SetFlags(log.Ltime)
	if *base != "" {
		os.Exit(compare(*base, *jsonPath, *tolerance))
	}
	if err := measure(*binary, *md, *jsonPath, *quick, *only, *profile, flags); err != nil {
		log.Fatal(err)
	}
}

func measure(binary, md, jsonPath string, quick bool, only, profile string, flags []string) error {
	binary, err := filepath.Abs(binary)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "sp-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	run, err := bench.New(ctx, bench.Options{Binary: binary, Dir: dir, Quick: quick, Logf: log.Printf, Only: only, Flags: flags, Profile: profile})
	if err != nil {
		return err
	}
	err = run.All(ctx)
	if cerr := run.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := run.Report.WriteJSON(jsonPath); err != nil {
		return err
	}
	f, err := os.Create(md)
	if err != nil {
		return err
	}
	defer f.Close()
	command := "make bench"
	if quick {
		command = "staticpod-bench -quick"
	}
	if err := run.Report.WriteMarkdown(f, command); err != nil {
		return err
	}
	log.Printf("wrote %s and %s", md, jsonPath)
	return f.Close()
}

// compare prints the regressions of the run in now against base, and returns the
// exit code: 1 if there are any.
func compare(base, now string, tolerance float64) int {
	b, err := bench.ReadReport(base)
	if err != nil {
		log.Print(err)
		return 2
	}
	n, err := bench.ReadReport(now)
	if err != nil {
		log.Print(err)
		return 2
	}
	worse, missing := bench.Compare(b, n, tolerance)
	for _, id := range missing {
		fmt.Printf("missing  %s\n", id)
	}
	for _, w := range worse {
		what := fmt.Sprintf("%.3g → %.3g %s", w.Base, w.Now, w.Unit)
		if w.RatioBased {
			what = fmt.Sprintf("%.2f× → %.2f× the floor", w.Base, w.Now)
		}
		fmt.Printf("worse    %-40s %s (%+.0f%%)\n", w.ID, what, 100*(w.Worse-1))
	}
	fmt.Printf("%d of %d figures worse by more than %.0f%% (%s against %s)\n", len(worse), len(b.Rows), 100*tolerance, now, base)
	if len(worse) > 0 {
		return 1
	}
	return 0
}

// flagList is a repeatable string flag.
type flagList []string

func (f *flagList) String() string     { return fmt.Sprint(*f) }
func (f *flagList) Set(v string) error { *f = append(*f, v); return nil }
