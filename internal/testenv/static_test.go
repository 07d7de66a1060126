package testenv

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/platforms"
	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// elfFile writes a minimal ELF executable header of the given class and byte order with
// a PT_LOAD, an optional PT_INTERP and a PT_NOTE program header, and returns its path.
// Its machine is x86-64 or i386, by class.
func elfFile(t *testing.T, class elf.Class, order binary.ByteOrder, interp bool) string {
	t.Helper()
	machine := elf.EM_X86_64
	if class == elf.ELFCLASS32 {
		machine = elf.EM_386
	}
	return machineFile(t, class, order, machine, interp)
}

// machineFile is elfFile for the machine given.
func machineFile(t *testing.T, class elf.Class, order binary.ByteOrder, machine elf.Machine, interp bool) string {
	t.Helper()
	progs := []elf.ProgType{elf.PT_LOAD}
	if interp {
		progs = append(progs, elf.PT_INTERP)
	}
	progs = append(progs, elf.PT_NOTE)
	data := elf.ELFDATA2LSB
	if order == binary.BigEndian {
		data = elf.ELFDATA2MSB
	}
	ident := [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(class), byte(data), byte(elf.EV_CURRENT)}
	var buf bytes.Buffer
	if class == elf.ELFCLASS64 {
		binary.Write(&buf, order, elf.Header64{Ident: ident, Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
			Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs)), Shentsize: 64})
		for _, p := range progs {
			binary.Write(&buf, order, elf.Prog64{Type: uint32(p)})
		}
	} else {
		binary.Write(&buf, order, elf.Header32{Ident: ident, Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
			Phoff: 52, Ehsize: 52, Phentsize: 32, Phnum: uint16(len(progs)), Shentsize: 40})
		for _, p := range progs {
			binary.Write(&buf, order, elf.Prog32{Type: uint32(p)})
		}
	}
	path := filepath.Join(t.TempDir(), "elf")
	if err := os.WriteFile(path, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// depsScript is hack/deps.sh, which installs busybox-static when /bin/busybox is not a
// static binary.
var depsScript = filepath.Join("..", "..", "hack", "deps.sh")

// depsSaysStatic runs hack/deps.sh's static_elf on path.
func depsSaysStatic(t *testing.T, path string) bool {
	t.Helper()
	err := exec.Command("bash", "-c", `source "$1" && static_elf "$2"`, "bash", depsScript, path).Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", depsScript, err)
	}
	return err == nil
}

// TestOnlyAStaticBusyboxIsTaken: the test images' builder refuses, with what to do, and
// hack/deps.sh takes as missing (so it installs busybox-static), a busybox that is
// dynamically linked, as Debian's busybox package is, or that is no ELF executable at
// all; both take a static one, of either ELF class and byte order.
func TestOnlyAStaticBusyboxIsTaken(t *testing.T) {
	static := filepath.Join(t.TempDir(), "static")
	build := exec.Command("go", "build", "-o", static, "./cmd/udpecho")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build a static program: %v\n%s", err, out)
	}
	script := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		path   string
		static bool
	}{
		"a static Go program":         {static, true},
		"a shell script":              {script, false},
		"a missing file":              {filepath.Join(t.TempDir(), "none"), false},
		"64-bit little-endian":        {elfFile(t, elf.ELFCLASS64, binary.LittleEndian, false), true},
		"64-bit little-endian, ld.so": {elfFile(t, elf.ELFCLASS64, binary.LittleEndian, true), false},
		"32-bit little-endian":        {elfFile(t, elf.ELFCLASS32, binary.LittleEndian, false), true},
		"32-bit little-endian, ld.so": {elfFile(t, elf.ELFCLASS32, binary.LittleEndian, true), false},
		"64-bit big-endian":           {elfFile(t, elf.ELFCLASS64, binary.BigEndian, false), true},
		"64-bit big-endian, ld.so":    {elfFile(t, elf.ELFCLASS64, binary.BigEndian, true), false},
		"32-bit big-endian":           {elfFile(t, elf.ELFCLASS32, binary.BigEndian, false), true},
		"32-bit big-endian, ld.so":    {elfFile(t, elf.ELFCLASS32, binary.BigEndian, true), false},
	}
	if _, err := os.Stat("/bin/ls"); err == nil {
		cases["/bin/ls, dynamic"] = struct {
			path   string
			static bool
		}{"/bin/ls", false}
	}
	for name, tc := range cases {
		_, err := requireStatic(tc.path)
		switch {
		case tc.static && err != nil:
			t.Errorf("%s: requireStatic = %v, want nil", name, err)
		case !tc.static && (err == nil || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "install busybox-static")):
			t.Errorf("%s: requireStatic = %v, want a refusal that says to install busybox-static", name, err)
		}
		if got := depsSaysStatic(t, tc.path); got != tc.static {
			t.Errorf("%s: hack/deps.sh static_elf = %v, want %v", name, got, tc.static)
		}
	}
}

// TestImagePlatformIsItsBusyboxs: a test image says the platform its busybox runs on,
// not the host's, so that one built on amd64 from an arm64 busybox (make vm-test-arm64)
// is unpacked on arm64; a machine the list lacks gives the host's.
func TestImagePlatformIsItsBusyboxs(t *testing.T) {
	host := platforms.DefaultSpec()
	host.OS = "linux"
	cases := map[string]struct {
		class   elf.Class
		order   binary.ByteOrder
		machine elf.Machine
		want    ocispec.Platform
	}{
		"aarch64":         {elf.ELFCLASS64, binary.LittleEndian, elf.EM_AARCH64, ocispec.Platform{OS: "linux", Architecture: "arm64"}},
		"x86-64":          {elf.ELFCLASS64, binary.LittleEndian, elf.EM_X86_64, ocispec.Platform{OS: "linux", Architecture: "amd64"}},
		"arm, 32-bit":     {elf.ELFCLASS32, binary.LittleEndian, elf.EM_ARM, ocispec.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}},
		"ppc64 little":    {elf.ELFCLASS64, binary.LittleEndian, elf.EM_PPC64, ocispec.Platform{OS: "linux", Architecture: "ppc64le"}},
		"ppc64 big: host": {elf.ELFCLASS64, binary.BigEndian, elf.EM_PPC64, host},
		"unknown: host":   {elf.ELFCLASS64, binary.LittleEndian, elf.EM_VAX, host},
	}
	for name, tc := range cases {
		got, err := requireStatic(machineFile(t, tc.class, tc.order, tc.machine, false))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: platform (-want +got):\n%s", name, diff)
		}
	}
}
