package stats

import (
	"os"
	"path/filepath"
	"testing"
)

// writeFiles lays files (path relative to root: content) out under root.
func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const psiFile = "some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\nfull avg10=0.50 avg60=0.00 avg300=0.00 total=678\n"

func TestReadersComputeTheKubeletsFigures(t *testing.T) {
	v1 := map[string]string{
		"cpuacct/pod/cpuacct.usage":          "5000000000\n",
		"memory/pod/memory.usage_in_bytes":   "30000000\n",
		"memory/pod/memory.stat":             "cache 100\nrss 1\ntotal_cache 9000000\ntotal_rss 17000000\ntotal_inactive_file 4000000\ntotal_pgfault 321\ntotal_pgmajfault 3\n",
		"cpuacct/low/cpuacct.usage":          "1\n",
		"memory/low/memory.usage_in_bytes":   "1000\n",
		"memory/low/memory.stat":             "total_inactive_file 5000\n",
		"cpuacct/bad/cpuacct.usage":          "x\n",
		"memory/nocpu/memory.usage_in_bytes": "1\n",
	}
	v2 := map[string]string{
		"pod/cpu.stat":         "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
		"pod/memory.current":   "20000000\n",
		"pod/memory.stat":      "anon 16000000\nfile 4000000\ninactive_file 3000000\npgfault 55\npgmajfault 2\n",
		"pod/cpu.pressure":     psiFile,
		"pod/memory.pressure":  psiFile,
		"pod/io.pressure":      psiFile,
		"nopsi/cpu.stat":       "usage_usec 1\n",
		"nopsi/memory.current": "10\n",
		"nopsi/memory.stat":    "inactive_file 4\n",
		"cpu.stat":             "usage_usec 7000000\n",
		"memory.stat":          "pgfault 9\npgmajfault 1\n",
		"meminfo":              "MemTotal:       1000 kB\nMemFree:         200 kB\nInactive(file):  100 kB\nAnonPages:       300 kB\n",
	}
	root1, root2 := t.TempDir(), t.TempDir()
	writeFiles(t, root1, v1)
	writeFiles(t, root2, v2)
	psi := PSI{Some: PSILine{Avg10: 1.5, Avg60: 0.25, Total: 12345}, Full: PSILine{Avg10: 0.5, Total: 678}}
	for _, tc := range []struct {
		name    string
		read    func() (Usage, error)
		want    Usage
		wantErr bool
	}{
		{"v1 working set is usage less total_inactive_file", func() (Usage, error) { return ReadV1(root1, "/pod") },
			Usage{CPUNanos: 5e9, MemoryUsage: 30e6, WorkingSet: 26e6, RSS: 17e6, PageFaults: 321, MajorPageFaults: 3}, false},
		{"v1 working set is 0 when inactive file exceeds usage", func() (Usage, error) { return ReadV1(root1, "low") },
			Usage{CPUNanos: 1, MemoryUsage: 1000}, false},
		{"v1 unparsable cpuacct.usage is an error", func() (Usage, error) { return ReadV1(root1, "bad") }, Usage{}, true},
		{"v1 missing cgroup is an error", func() (Usage, error) { return ReadV1(root1, "nocpu") }, Usage{}, true},
		{"v2 reads usage_usec in ns, anon as RSS, and PSI", func() (Usage, error) { return ReadV2(root2, "pod") },
			Usage{CPUNanos: 2.5e9, MemoryUsage: 20e6, WorkingSet: 17e6, RSS: 16e6, PageFaults: 55, MajorPageFaults: 2,
				PSI: &Pressure{CPU: psi, Memory: psi, IO: psi}}, false},
		{"v2 without pressure files has no PSI", func() (Usage, error) { return ReadV2(root2, "nopsi") },
			Usage{CPUNanos: 1000, MemoryUsage: 10, WorkingSet: 6}, false},
		{"v2 missing cgroup is an error", func() (Usage, error) { return ReadV2(root2, "gone") }, Usage{}, true},
		{"v2 node reads memory from meminfo", func() (Usage, error) { return ReadNodeV2(root2, filepath.Join(root2, "meminfo")) },
			Usage{CPUNanos: 7e9, MemoryUsage: 800 << 10, WorkingSet: 700 << 10, RSS: 300 << 10, PageFaults: 9, MajorPageFaults: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.read()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if (got.PSI == nil) != (tc.want.PSI == nil) || (got.PSI != nil && *got.PSI != *tc.want.PSI) {
				t.Errorf("PSI = %+v, want %+v", got.PSI, tc.want.PSI)
			}
			got.PSI, tc.want.PSI = nil, nil
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
