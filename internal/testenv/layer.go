package testenv

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// epoch is the modification time of every entry in the images this package builds, so that
// the same options always give the same digests.
var epoch = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

const (
	// DefaultBusybox is where Debian's busybox-static installs its binary.
	DefaultBusybox = "/bin/busybox"
	// busyboxEnv overrides DefaultBusybox when ImageOptions.Busybox is empty.
	busyboxEnv = "STATICPOD_TEST_BUSYBOX"
)

// File is one extra file baked into a test image.
type File struct {
	Content []byte
	Mode    fs.FileMode // permission bits; 0 means 0644
}

// baseDirs are the directories every test image has, with their modes.
var baseDirs = []struct {
	name string
	mode fs.FileMode
}{
	{"bin", 0o755}, {"dev", 0o755}, {"etc", 0o755}, {"proc", 0o555}, {"root", 0o700},
	{"sys", 0o555}, {"tmp", 0o777 | fs.ModeSticky}, {"usr", 0o755}, {"var", 0o755},
}

// baseFiles are the files every test image has unless ImageOptions.Files replaces them.
var baseFiles = map[string]File{
	"etc/passwd": {Content: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
	"etc/group":  {Content: []byte("root:x:0:\nnobody:x:65534:\n")},
}

// busyboxPath returns the busybox binary the image is built from.
func busyboxPath(opts ImageOptions) string {
	if opts.Busybox != "" {
		return opts.Busybox
	}
	if p := os.Getenv(busyboxEnv); p != "" {
		return p
	}
	return DefaultBusybox
}

// readBusybox reads a static busybox binary, asks it for its applets, and returns the
// platform it runs on, the image's.
func readBusybox(p string) (binary []byte, applets []string, platform ocispec.Platform, err error) {
	binary, err = os.ReadFile(p)
	if err != nil {
		return nil, nil, platform, fmt.Errorf("read busybox: %w: install busybox-static or set %s: %w", err, busyboxEnv, ErrUnavailable)
	}
	if platform, err = requireStatic(p); err != nil {
		return nil, nil, platform, err
	}
	out, err := exec.Command(p, "--list").Output()
	if err != nil {
		return nil, nil, platform, fmt.Errorf("list applets of %s: %w", p, err)
	}
	for _, name := range strings.Fields(string(out)) {
		if name != "busybox" && !strings.Contains(name, "/") {
			applets = append(applets, name)
		}
	}
	return binary, applets, platform, nil
}

// requireStatic fails for a binary that is not a static ELF executable (one with a
// program interpreter, PT_INTERP, needs a dynamic loader and a libc), which could not run
// in an image that holds no libc. hack/deps.sh's static_elf asks the same question. It
// returns the platform the binary is for (see elfPlatform).
func requireStatic(p string) (ocispec.Platform, error) {
	f, err := elf.Open(p)
	if err != nil {
		return ocispec.Platform{}, fmt.Errorf("busybox %s is not an ELF executable (%w); install busybox-static or set %s: %w", p, err, busyboxEnv, ErrUnavailable)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return ocispec.Platform{}, fmt.Errorf("busybox %s is dynamically linked, and the test images hold no libc: install busybox-static "+
				"(apt-get install busybox-static replaces Debian's dynamic busybox, which initramfs-tools pulls in), or set %s to a static busybox: %w",
				p, busyboxEnv, ErrUnavailable)
		}
	}
	return elfPlatform(f), nil
}

// elfPlatform is the linux platform of an ELF executable's machine, so that an image
// built from another architecture's busybox (the arm64 VM test's, built on an amd64
// host) says so and is unpacked where it runs; this host's platform for a machine it
// does not know.
func elfPlatform(f *elf.File) ocispec.Platform {
	arch := map[elf.Machine]string{
		elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_386: "386",
		elf.EM_RISCV: "riscv64", elf.EM_S390: "s390x",
	}[f.Machine]
	variant := ""
	switch {
	case f.Machine == elf.EM_ARM:
		arch, variant = "arm", "v7"
	case f.Machine == elf.EM_PPC64 && f.Data == elf.ELFDATA2LSB:
		arch = "ppc64le"
	}
	if arch == "" {
		p := platforms.DefaultSpec()
		p.OS = "linux"
		return p
	}
	return ocispec.Platform{OS: "linux", Architecture: arch, Variant: variant}
}

// buildLayer returns the uncompressed tar of the image's single layer: the base directories,
// busybox with a symlink per applet in /bin, /etc/passwd and /etc/group, and extra files.
func buildLayer(binary []byte, applets []string, files map[string]File) ([]byte, error) {
	all := make(map[string]File, len(baseFiles)+len(files))
	for name, f := range baseFiles {
		all[name] = f
	}
	for name, f := range files {
		clean := strings.TrimPrefix(path.Clean("/"+name), "/")
		if clean == "" {
			return nil, fmt.Errorf("add file %q: not a file path", name)
		}
		all[clean] = f
	}
	all["bin/busybox"] = File{Content: binary, Mode: 0o755}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	w := layerWriter{tw: tw, dirs: map[string]bool{}}
	for _, d := range baseDirs {
		w.dir(d.name, d.mode)
	}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		w.file(name, all[name])
	}
	for _, a := range applets {
		if _, ok := all["bin/"+a]; !ok {
			w.symlink("bin/"+a, "busybox")
		}
	}
	if w.err != nil {
		return nil, fmt.Errorf("write layer: %w", w.err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}

// layerWriter writes root-owned entries with fixed times, creating parent directories on
// first use. It keeps the first error and ignores later writes.
type layerWriter struct {
	tw   *tar.Writer
	dirs map[string]bool // directories already written
	err  error
}

func (w *layerWriter) write(hdr *tar.Header, content []byte) {
	if w.err != nil {
		return
	}
	hdr.ModTime, hdr.Uname, hdr.Gname, hdr.Format = epoch, "root", "root", tar.FormatPAX
	if w.err = w.tw.WriteHeader(hdr); w.err == nil && len(content) > 0 {
		_, w.err = w.tw.Write(content)
	}
}

func (w *layerWriter) dir(name string, mode fs.FileMode) {
	if w.dirs[name] {
		return
	}
	if parent := path.Dir(name); parent != "." {
		w.dir(parent, 0o755)
	}
	w.dirs[name] = true
	w.write(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: tarMode(mode)}, nil)
}

func (w *layerWriter) file(name string, f File) {
	if parent := path.Dir(name); parent != "." {
		w.dir(parent, 0o755)
	}
	mode := f.Mode
	if mode.Perm() == 0 {
		mode |= 0o644
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: tarMode(mode), Size: int64(len(f.Content))}
	w.write(hdr, f.Content)
}

func (w *layerWriter) symlink(name, target string) {
	w.write(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}, nil)
}

// tarMode converts permission and special bits to the tar header's encoding.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	return mode
}
