package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
)

// startProfiles begins CPU profiles, over profileSpan, of the Go programs serving
// /debug/pprof/ on the unix sockets of who (by name), written to <dir>/<prefix>-<name>.pprof,
// and returns once they have begun; Wait on what it returns for them to be written.
func startProfiles(ctx context.Context, dir, prefix string, who map[string]string) *errgroup.Group {
	var g errgroup.Group
	for name, socket := range who {
		out := filepath.Join(dir, prefix+"-"+name+".pprof")
		g.Go(func() error { return profileCPU(ctx, socket, profileSpan, out) })
	}
	time.Sleep(50 * time.Millisecond) // for the profilers to have begun
	return &g
}

// profileSpan is how long a burst's profiles run: longer than a burst of 100 pods.
const profileSpan = 8 * time.Second

// profileCPU writes the CPU profile of the Go program serving /debug/pprof/ on the unix
// socket at socket, taken over the next d, to path.
func profileCPU(ctx context.Context, socket string, d time.Duration, path string) error {
	return saveProfile(ctx, socket, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), path)
}

// saveProfile writes the profile /debug/pprof/<which> of the Go program serving it on
// the unix socket at socket to path.
func saveProfile(ctx context.Context, socket, which, path string) error {
	hc := overUnixSocket(socket)
	url := "http://local/debug/pprof/" + which
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", socket, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
