// Package ctrd starts and supervises a private containerd: the one staticpod runs with
// --start-containerd on a machine that has none, and the ones tests run. It writes a
// small configuration that containerd 1.6 reads as is and 2.x migrates, with the CRI
// plugin and everything a static-pod runner does not use turned off.
//
// It imports nothing of staticpod's.
package ctrd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
)

// DisabledPlugins keeps a private daemon small: no CRI (its 1.6 and 2.x plugin IDs, and
// 2.x's pod sandbox controller that needs it), no NRI socket shared by every daemon on
// the host, no /opt/containerd, and none of the snapshotters that only log why they
// cannot load. Both 1.6 and 2.x ignore IDs they do not know.
var DisabledPlugins = []string{
	"io.containerd.grpc.v1.cri",
	"io.containerd.cri.v1.images",
	"io.containerd.cri.v1.runtime",
	"io.containerd.podsandbox.controller.v1.podsandbox",
	"io.containerd.nri.v1.nri",
	"io.containerd.internal.v1.opt",
	"io.containerd.snapshotter.v1.aufs",
	"io.containerd.snapshotter.v1.btrfs",
	"io.containerd.snapshotter.v1.devmapper",
	"io.containerd.snapshotter.v1.zfs",
}

// Config is where a private containerd keeps its files and listens.
type Config struct {
	Root     string // --root: content, metadata, snapshots
	State    string // --state: task bundles, mounts
	Address  string // gRPC socket; the ttrpc socket is Address + ".ttrpc"
	Debug    string // debug socket; "" for none
	LogLevel string // "" = containerd's default
}

// TOML is the daemon's configuration file, version 2.
func (c Config) TOML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version = 2\nroot = %q\nstate = %q\n", c.Root, c.State)
	fmt.Fprintf(&b, "disabled_plugins = [%s]\n\n", quoteList(DisabledPlugins))
	fmt.Fprintf(&b, "[grpc]\n  address = %q\n\n", c.Address)
	fmt.Fprintf(&b, "[ttrpc]\n  address = %q\n\n", c.Address+".ttrpc")
	if c.Debug != "" || c.LogLevel != "" {
		fmt.Fprintf(&b, "[debug]\n  address = %q\n", c.Debug)
		if c.LogLevel != "" {
			fmt.Fprintf(&b, "  level = %q\n", c.LogLevel)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "[metrics]\n  address = \"\"\n")
	return b.String()
}

func quoteList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(quoted, ", ")
}

// WriteConfig writes the configuration to path (0600) and creates the daemon's
// directories.
func (c Config) WriteConfig(path string) error {
	for _, d := range []string{c.Root, c.State, filepath.Dir(c.Address), filepath.Dir(path)} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("containerd directories: %w", err)
		}
	}
	if err := os.WriteFile(path, []byte(c.TOML()), 0o600); err != nil {
		return fmt.Errorf("write containerd config: %w", err)
	}
	return nil
}

// Serving reports whether a containerd answers at address within timeout.
func Serving(ctx context.Context, address string, timeout time.Duration) error {
	if _, err := os.Stat(address); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.New(address, client.WithTimeout(timeout))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Version(ctx)
	return err
}

// AwaitServing polls until a containerd answers at address, exited is closed, or ctx
// is done. Each attempt dials anew: a gRPC connection that failed once backs off.
func AwaitServing(ctx context.Context, address string, exited <-chan struct{}) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		lastErr := Serving(ctx, address, time.Second)
		if lastErr == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("containerd exited")
		case <-ctx.Done():
			return fmt.Errorf("await containerd at %s: %w (last error: %v)", address, ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}
