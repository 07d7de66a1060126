package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/staticpod/staticpod/internal/atomicfile"
)

const (
	// Length is the number of IDs of a pod's user namespace, and the size of a block.
	Length = 1 << 16
	// MaxPods bounds the pods with user namespaces, as the kubelet bounds them.
	MaxPods = 1024
	// File is the name of the mapping's file in a pod's directory.
	File = "userns"
)

// Mapping maps the IDs 0..Length-1 of a pod's user namespace, users and groups alike,
// to the host's HostID..HostID+Length-1.
type Mapping struct {
	HostID uint32
}

// ToHost is the host's ID of id in the namespace; ok is false for an ID out of it.
func (m Mapping) ToHost(id uint32) (host uint32, ok bool) {
	if id >= Length {
		return 0, false
	}
	return m.HostID + id, true
}

// Allocator hands out the mappings of the pods whose directories are under its pods
// directory.
type Allocator struct {
	podsDir string

	mu     sync.Mutex        // guards loaded, blocks and byPod
	loaded bool              // the pods' files were read
	blocks map[uint32]string // block index -> pod UID
	byPod  map[string]uint32 // pod UID -> block index
}

// New returns an Allocator of the pods under podsDir (<pods>/<uid>). It reads nothing
// until first asked.
func New(podsDir string) *Allocator {
	return &Allocator{podsDir: podsDir}
}

// fileMapping is the kubelet's format of the file.
type fileMapping struct {
	UIDMappings []idMapping `json:"uidMappings"`
	GIDMappings []idMapping `json:"gidMappings"`
}

type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// Get returns the mapping of pod uid: the one its directory records, else a free block,
// recorded there first (the directory is made if need be). It fails when every block is
// taken, or when the recorded mapping is not one Get makes or is another pod's.
func (a *Allocator) Get(uid string) (Mapping, error) {
	dir, err := a.podDir(uid)
	if err != nil {
		return Mapping{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.load(); err != nil {
		return Mapping{}, err
	}
	if b, ok := a.byPod[uid]; ok {
		return Mapping{HostID: b * Length}, nil
	}
	// A file written by another process since load: taken as recorded.
	if m, found, err := readFile(dir); err != nil {
		return Mapping{}, fmt.Errorf("user namespace of pod %s: %w", uid, err)
	} else if found {
		return m, a.record(uid, m)
	}
	if len(a.byPod) >= MaxPods {
		return Mapping{}, fmt.Errorf("user namespace of pod %s: all %d user namespaces are in use", uid, MaxPods)
	}
	var b uint32 = 1 // block 0 is the host's
	for ; a.blocks[b] != ""; b++ {
	}
	m := Mapping{HostID: b * Length}
	if err := writeFile(dir, m); err != nil {
		return Mapping{}, fmt.Errorf("user namespace of pod %s: %w", uid, err)
	}
	return m, a.record(uid, m)
}

// Release frees the block of pod uid and removes its file, if its directory still
// holds one.
func (a *Allocator) Release(uid string) error {
	dir, err := a.podDir(uid)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if b, ok := a.byPod[uid]; ok {
		delete(a.byPod, uid)
		delete(a.blocks, b)
	}
	if err := os.Remove(filepath.Join(dir, File)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release user namespace of pod %s: %w", uid, err)
	}
	return nil
}

// load reads the file of every pod directory once. A file that is not one Get writes,
// or that claims a block another pod's claims, fails the load, which is tried again
// at the next Get: handing out blocks without knowing every claim could give one block
// to two pods.
func (a *Allocator) load() error {
	if a.loaded {
		return nil
	}
	a.blocks, a.byPod = map[uint32]string{}, map[string]uint32{}
	entries, err := os.ReadDir(a.podsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read user namespaces: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		m, found, err := readFile(filepath.Join(a.podsDir, e.Name()))
		if err != nil {
			return fmt.Errorf("read user namespace of pod %s: %w", e.Name(), err)
		}
		if found {
			if err := a.record(e.Name(), m); err != nil {
				return err
			}
		}
	}
	a.loaded = true
	return nil
}

// record notes that pod uid holds m.
func (a *Allocator) record(uid string, m Mapping) error {
	b := m.HostID / Length
	if other := a.blocks[b]; other != "" && other != uid {
		return fmt.Errorf("user namespace of pod %s: host IDs %d-%d are pod %s's", uid, m.HostID, m.HostID+Length-1, other)
	}
	a.blocks[b], a.byPod[uid] = uid, b
	return nil
}

func (a *Allocator) podDir(uid string) (string, error) {
	if uid == "" || uid == "." || uid == ".." || strings.ContainsRune(uid, '/') {
		return "", fmt.Errorf("user namespace: pod UID %q cannot be a path component", uid)
	}
	return filepath.Join(a.podsDir, uid), nil
}

// Read returns the mapping recorded in pod directory dir, by Get; found is false when
// there is none (the pod runs in the host's user namespace, or has not been given one).
func Read(dir string) (m Mapping, found bool, err error) {
	m, found, err = readFile(dir)
	if err != nil {
		return Mapping{}, false, fmt.Errorf("read user namespace in %s: %w", dir, err)
	}
	return m, found, nil
}

// readFile reads the mapping recorded in pod directory dir; found is false when there
// is none.
func readFile(dir string) (m Mapping, found bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, File))
	if errors.Is(err, fs.ErrNotExist) {
		return Mapping{}, false, nil
	}
	if err != nil {
		return Mapping{}, false, err
	}
	var f fileMapping
	if err := json.Unmarshal(data, &f); err != nil {
		return Mapping{}, false, fmt.Errorf("%s: %w", File, err)
	}
	if len(f.UIDMappings) != 1 || len(f.GIDMappings) != 1 || f.UIDMappings[0] != f.GIDMappings[0] {
		return Mapping{}, false, fmt.Errorf("%s: want one mapping, the same for users and groups", File)
	}
	u := f.UIDMappings[0]
	if u.ContainerID != 0 || u.Length != Length || u.HostID%Length != 0 || u.HostID == 0 {
		return Mapping{}, false, fmt.Errorf("%s: want %d IDs from 0 to a block of the host's above the first, have %+v", File, Length, u)
	}
	return Mapping{HostID: u.HostID}, true, nil
}

func writeFile(dir string, m Mapping) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	one := []idMapping{{HostID: m.HostID, ContainerID: 0, Length: Length}}
	data, err := json.Marshal(fileMapping{UIDMappings: one, GIDMappings: one})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, File), data, 0o600)
}
