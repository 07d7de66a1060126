package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

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
