package proc

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeProc is a /proc for tests; files writes process pid's files.
type fakeProc string

func newFakeProc(t *testing.T) fakeProc { return fakeProc(t.TempDir()) }

// files writes name -> content under process pid's directory; a content beginning
// with "->" makes a symlink to the rest.
func (p fakeProc) files(t *testing.T, pid int, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := Path(string(p), pid, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, path)
		} else {
			err = os.WriteFile(path, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestPIDsListsOnlyNumberedEntries(t *testing.T) {
	p := newFakeProc(t)
	p.files(t, 7, map[string]string{"stat": ""})
	p.files(t, 12, map[string]string{"stat": ""})
	for _, other := range []string{"self", "net", "1x"} {
		if err := os.MkdirAll(filepath.Join(string(p), other), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := PIDs(string(p))
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []int{7, 12}) {
		t.Errorf("PIDs = %v, %v; want [7 12]", got, err)
	}
	if _, err := PIDs(filepath.Join(string(p), "none")); err == nil {
		t.Error("PIDs of a missing directory: no error")
	}
}

func TestCmdlineSplitsOnNULs(t *testing.T) {
	p := newFakeProc(t)
	p.files(t, 1, map[string]string{"cmdline": "/bin/sh\x00-c\x00echo a  b\x00"})
	p.files(t, 2, map[string]string{"cmdline": ""}) // a kernel thread
	for _, tc := range []struct {
		pid     int
		want    []string
		wantErr bool
	}{
		{pid: 1, want: []string{"/bin/sh", "-c", "echo a  b"}},
		{pid: 2},
		{pid: 3, wantErr: true},
	} {
		got, err := Cmdline(string(p), tc.pid)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("Cmdline(%d) = %q, %v; want %q, error %t", tc.pid, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseStatReadsPastAnyCommandName(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Stat
		err      bool
	}{
		{name: "plain", in: "42 (sleep) S 7 42 42 0 -1 4194560 0 0 0 0 15 3 0 0 20 0 1 0 98765 0 0", want: Stat{State: "S", PPID: 7, UTime: 15, STime: 3, StartTime: 98765}},
		// The command name may hold spaces and parentheses: the fields follow its last ")".
		{name: "hostile name", in: "42 (a) Z 1 (b) c) Z 9 1 1 0 -1 4194560 0 0 0 0 1 2 0 0 20 0 1 0 500 0 0", want: Stat{State: "Z", PPID: 9, UTime: 1, STime: 2, StartTime: 500}},
		{name: "no name", in: "42 sleep S 7", err: true},
		{name: "cut short", in: "42 (sleep) S 7 42 42 0", err: true},
		{name: "not a number", in: "42 (sleep) S x 42 42 0 -1 4194560 0 0 0 0 15 3 0 0 20 0 1 0 98765 0 0", err: true},
	} {
		got, err := ParseStat(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%s: ParseStat error %v, want error %t", tc.name, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: ParseStat (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	st, err := ReadStat(Root, os.Getpid())
	if err != nil || st.PPID != os.Getppid() || st.StartTime == 0 {
		t.Errorf("ReadStat(self) = %+v, %v; want parent %d and a start time", st, err, os.Getppid())
	}
}

func TestReadStatusReadsUIDsAndRSS(t *testing.T) {
	p := newFakeProc(t)
	p.files(t, 1, map[string]string{"status": "Name:\tsh\nUid:\t0\t1000\t0\t0\nGid:\t0\t0\t0\t0\nVmRSS:\t   2048 kB\n"})
	p.files(t, 2, map[string]string{"status": "Name:\tkthreadd\nUid:\t0\t0\t0\t0\n"})
	p.files(t, 3, map[string]string{"status": "Name:\tx\nUid:\t0\t0\n"})
	p.files(t, 4, map[string]string{"status": "Name:\tx\n"})
	for _, tc := range []struct {
		pid     int
		want    Status
		wantErr bool
	}{
		{pid: 1, want: Status{UIDs: [4]int{0, 1000, 0, 0}, RSS: 2048, HasRSS: true}},
		{pid: 2, want: Status{}},
		{pid: 3, wantErr: true}, // not four IDs
		{pid: 4, wantErr: true}, // no Uid line
		{pid: 5, wantErr: true}, // no process
	} {
		got, err := ReadStatus(string(p), tc.pid)
		if (err != nil) != tc.wantErr {
			t.Errorf("ReadStatus(%d) error %v, want error %t", tc.pid, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ReadStatus(%d) (-want +got):\n%s", tc.pid, diff)
		}
	}
}

func TestExeAndRootDir(t *testing.T) {
	p := newFakeProc(t)
	bin := filepath.Join(t.TempDir(), "shim")
	if err := os.WriteFile(bin, []byte("a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.files(t, 1, map[string]string{"exe": "->" + bin, "root": "->/"})
	if got, err := Exe(string(p), 1); err != nil || got != bin {
		t.Errorf("Exe = %q, %v; want %q", got, err, bin)
	}
	exe, err := ExeFile(string(p), 1)
	want, _ := os.Stat(bin)
	if err != nil || !os.SameFile(exe, want) {
		t.Errorf("ExeFile = %v, %v; want the file %s", exe, err, bin)
	}
	root, err := RootDir(string(p), 1)
	host, _ := os.Stat("/")
	if err != nil || !os.SameFile(root, host) {
		t.Errorf("RootDir = %v, %v; want /", root, err)
	}
}

func TestChildrenOfEveryThread(t *testing.T) {
	p := newFakeProc(t)
	p.files(t, 1, map[string]string{"task/1/children": "5 6 ", "task/2/children": "7 "})
	p.files(t, 2, map[string]string{"task/2/children": ""})
	p.files(t, 3, map[string]string{"stat": ""}) // no task directory
	p.files(t, 4, map[string]string{"task/4/children": "5 x"})
	for _, tc := range []struct {
		pid     int
		want    []int
		wantErr bool
	}{
		{pid: 1, want: []int{5, 6, 7}},
		{pid: 2},
		{pid: 3, wantErr: true},
		{pid: 4, wantErr: true},
	} {
		got, err := Children(string(p), tc.pid)
		slices.Sort(got)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("Children(%d) = %v, %v; want %v, error %t", tc.pid, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestListeningUnixSocketsOfAFakeProcess(t *testing.T) {
	p := newFakeProc(t)
	table := "Num       RefCount Protocol Flags    Type St Inode Path\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 4242 /run/a.sock\n" + // listening, its
		"0000000000000000: 00000002 00000000 00010000 0001 01 4343 /run/b.sock\n" + // listening, another's
		"0000000000000000: 00000003 00000000 00000000 0001 03 4444 /run/a.sock\n" // connected, its
	p.files(t, 1, map[string]string{"fd/3": "->socket:[4242]", "fd/4": "->socket:[4444]", "fd/5": "->/dev/null", "net/unix": table})
	p.files(t, 2, map[string]string{"fd/3": "->socket:[4444]", "net/unix": table})
	if got, err := ListeningUnixSockets(string(p), 1); err != nil || !slices.Equal(got, []string{"/run/a.sock"}) {
		t.Errorf("ListeningUnixSockets(1) = %q, %v; want [/run/a.sock]", got, err)
	}
	if got, err := ListeningUnixSockets(string(p), 2); err == nil {
		t.Errorf("ListeningUnixSockets(2) = %q; want an error: it listens on none", got)
	}
}

func TestListeningUnixSocketsOfThisProcess(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for _, name := range []string{"a.sock", "b.sock"} {
		path := filepath.Join(dir, name)
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		want = append(want, path)
	}
	conn, err := net.Dial("unix", want[0]) // a connected socket beside them is none
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := ListeningUnixSockets(Root, os.Getpid())
	slices.Sort(got)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ListeningUnixSockets = %q, %v; want %q", got, err, want)
	}
}

func TestPathJoinsUnderTheProcessDirectory(t *testing.T) {
	if got, want := Path("/proc", 42, "task", "42", "children"), "/proc/42/task/42/children"; got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
	if got, want := Path("/x", 7), "/x/"+strconv.Itoa(7); got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
}

func TestRunTimeSumsEveryThreadsSchedstat(t *testing.T) {
	p := newFakeProc(t)
	p.files(t, 7, map[string]string{
		"task/7/schedstat": "1500000 20 3\n",
		"task/8/schedstat": "2500000 40 5\n",
	})
	got, err := RunTime(string(p), 7)
	if err != nil || got != 4*time.Millisecond {
		t.Fatalf("RunTime = %v, %v; want 4ms", got, err)
	}
	if _, err := RunTime(string(p), 9); err == nil {
		t.Error("RunTime of a process that is not there: no error")
	}
	if own, err := RunTime(Root, os.Getpid()); err != nil || own <= 0 {
		t.Errorf("RunTime of this process = %v, %v; want some time", own, err)
	}
}
