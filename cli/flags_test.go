package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/urfave/cli/v2"
)

// AbsoluteDirs makes a relative directory absolute from the working directory, the
// environment's as the flag's, and leaves absolute and empty ones as they are.
func TestAbsoluteDirs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("STATICPOD_POD_LOG_DIR", "logs/pods")
	var got map[string]string
	app := &cli.App{
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "root-dir"}, &cli.StringFlag{Name: "run-dir"},
			&cli.StringFlag{Name: "pod-log-dir", EnvVars: Env("pod-log-dir")}, &cli.StringFlag{Name: "image-dir"},
		},
		Action: func(c *cli.Context) error {
			if err := AbsoluteDirs(c, "root-dir", "run-dir", "pod-log-dir", "image-dir"); err != nil {
				return err
			}
			got = map[string]string{"root-dir": c.String("root-dir"), "run-dir": c.String("run-dir"),
				"pod-log-dir": c.String("pod-log-dir"), "image-dir": c.String("image-dir")}
			return nil
		},
	}
	if err := app.Run([]string{"staticpod", "--root-dir", "state/../root", "--run-dir", "/run/sp"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"root-dir": filepath.Join(wd, "root"), "run-dir": "/run/sp", "pod-log-dir": filepath.Join(wd, "logs/pods"), "image-dir": ""}
	for name, dir := range want {
		if got[name] != dir {
			t.Errorf("--%s = %q, want %q", name, got[name], dir)
		}
	}
}
