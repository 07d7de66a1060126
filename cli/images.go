package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"

	"github.com/staticpod/staticpod/api/wire"
)

// Images is the images command: the runtime's images, their size, their last use and
// whether a pod needs them, which is what image garbage collection goes by.
func Images() *cli.Command {
	return &cli.Command{
		Name:  "images",
		Usage: "list the images, their size and last use, and whether a pod needs them",
		Description: "IMAGE ID SIZE AGE LAST USED IN USE PINNED. An image IN USE (a pod the daemon knows needs it)\n" +
			"or PINNED (an archive in --image-dir brings it) is never garbage-collected; of the others,\n" +
			"the least recently used go first once the image filesystem is over --image-gc-high-threshold.",
		Flags: append(clientFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "json or yaml"},
		),
		Action: runImages,
	}
}

func runImages(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("images takes no arguments, got %q (see 'staticpod images --help')", c.Args().First()), ExitUsage)
	}
	format := c.String("output")
	if format != "" && format != "json" && format != "yaml" {
		return cli.Exit(fmt.Sprintf("-o %q: use json or yaml", format), ExitUsage)
	}
	api, err := newClient(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	images, err := api.Images(ctx)
	if err != nil {
		return exitError("images", err)
	}
	switch {
	case format != "":
		err = printImageList(c.App.Writer, images, format)
	case len(images) == 0:
		fmt.Fprintln(c.App.ErrWriter, "No images found.")
	default:
		err = printImages(c.App.Writer, images, time.Now())
	}
	return exitError("images", err)
}

// printImages prints the images as a table, one row per image ID with every name.
func printImages(w io.Writer, images []wire.ImageUse, now time.Time) error {
	rows := [][]string{{"IMAGE", "ID", "SIZE", "AGE", "LAST USED", "IN USE", "PINNED"}}
	for _, img := range images {
		lastUsed := "<unknown>"
		switch {
		case img.InUse:
			lastUsed = "now"
		case !img.LastUsed.IsZero():
			lastUsed = since(img.LastUsed, now) + " ago"
		}
		rows = append(rows, []string{
			orNone(strings.Join(img.Names, ",")), shortID(img.ID), bytesSize(img.Size), since(img.Created, now),
			lastUsed, yesNo(img.InUse), yesNo(img.Pinned),
		})
	}
	return NewTable(w).Print(rows...)
}

func printImageList(w io.Writer, images []wire.ImageUse, format string) error {
	var out []byte
	var err error
	if format == "json" {
		out, err = json.MarshalIndent(images, "", "    ")
	} else {
		out, err = yaml.Marshal(images)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, strings.TrimRight(string(out), "\n"))
	return err
}

// shortID is an image ID as docker and crictl print it: 12 hex digits.
func shortID(id string) string {
	_, hex, _ := strings.Cut(id, ":")
	if len(hex) > 12 {
		return hex[:12]
	}
	return id
}

// bytesSize prints n bytes in binary units, as crictl images does (7.5MiB).
func bytesSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	value, exp := float64(n)/unit, 0
	for value >= unit && exp < 4 {
		value /= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", value, "KMGTP"[exp])
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
