package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Smaps is what a process's smaps_rollup sums over its mappings, in KiB. PSS divides
// each page among the processes that map it: a binary's file pages cost a process
// less while another process runs the same binary.
type Smaps struct {
	RSS, PSS         int64
	PSSAnon, PSSFile int64 // of PSS: anonymous pages (heap, stacks) and file pages (the binary)
}

// SmapsRollup reads process pid's smaps_rollup.
func SmapsRollup(procRoot string, pid int) (Smaps, error) {
	f, err := os.Open(Path(procRoot, pid, "smaps_rollup"))
	if err != nil {
		return Smaps{}, err
	}
	defer f.Close()
	return ParseSmapsRollup(f)
}

// ParseSmapsRollup reads the "Key: <n> kB" lines of an smaps_rollup file. It fails
// when there is no Pss line: that is no smaps_rollup.
func ParseSmapsRollup(r io.Reader) (Smaps, error) {
	var s Smaps
	fields := map[string]*int64{"Rss:": &s.RSS, "Pss:": &s.PSS, "Pss_Anon:": &s.PSSAnon, "Pss_File:": &s.PSSFile}
	seen := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		dst, ok := fields[f[0]]
		if !ok {
			continue
		}
		kib, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || (len(f) > 2 && f[2] != "kB") {
			return Smaps{}, fmt.Errorf("smaps_rollup: %q: not a size in kB", sc.Text())
		}
		*dst = kib
		seen = seen || f[0] == "Pss:"
	}
	if err := sc.Err(); err != nil {
		return Smaps{}, fmt.Errorf("smaps_rollup: %w", err)
	}
	if !seen {
		return Smaps{}, errors.New("smaps_rollup: no Pss line")
	}
	return s, nil
}
