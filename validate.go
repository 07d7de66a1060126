package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/watcher"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check manifests: exit 0 when every one is valid, 1 when any is not",
		ArgsUsage: "PATH...",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "strict", Usage: "treat unknown and duplicate fields as errors"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
			nodeNameFlag(),
		},
		Action: runValidate,
	}
}

// validation is the report of validate, also its JSON form.
type validation struct {
	Valid bool             `json:"valid"`
	Files []fileValidation `json:"files"`
}

type fileValidation struct {
	Path     string    `json:"path"`
	Pods     []string  `json:"pods"`
	Errors   []problem `json:"errors"`
	Warnings []problem `json:"warnings"`
}

type problem struct {
	Document int    `json:"document,omitempty"`
	Field    string `json:"field,omitempty"`
	Message  string `json:"message"`
	Text     string `json:"text"` // the whole located message, as printed in text mode
}

func runValidate(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.Exit("validate needs at least one PATH (a manifest file or directory)", exitUsage)
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return cli.Exit(fmt.Sprintf("-o %q: use text or json", format), exitUsage)
	}
	node, err := nodeName(c)
	if err != nil {
		return cli.Exit(fmt.Sprintf("node name: %v", err), exitUsage)
	}
	report := validation{Valid: true}
	for _, path := range c.Args().Slice() {
		if _, err := os.Stat(path); err != nil {
			return cli.Exit(fmt.Sprintf("validate: %v", err), exitUsage)
		}
		snap, err := watcher.Scan(path, node)
		if err != nil {
			return cli.Exit(fmt.Sprintf("validate %s: %v", path, err), exitUsage)
		}
		report.add(snap, c.Bool("strict"))
	}
	if format == "json" {
		err = writeJSONReport(c.App.Writer, report)
	} else {
		err = writeTextReport(c.App.Writer, report)
	}
	if err != nil {
		return err
	}
	if !report.Valid {
		return cli.Exit("", exitInvalid)
	}
	return nil
}

func (v *validation) add(snap watcher.Snapshot, strict bool) {
	start := len(v.Files)
	for _, f := range snap.Files {
		fv := fileValidation{Path: f.Path, Pods: []string{}, Errors: []problem{}, Warnings: []problem{}}
		if f.ReadErr != nil {
			fv.Errors = append(fv.Errors, problem{Message: f.ReadErr.Error(), Text: f.ReadErr.Error()})
		}
		for _, p := range f.Result.Pods {
			fv.Pods = append(fv.Pods, manifests.Key(p))
		}
		fv.Errors = append(fv.Errors, toProblems(f.Result.Errors)...)
		if strict {
			fv.Errors = append(fv.Errors, toProblems(f.Result.Warnings)...)
		} else {
			fv.Warnings = append(fv.Warnings, toProblems(f.Result.Warnings)...)
		}
		v.Files = append(v.Files, fv)
	}
	for _, c := range snap.Conflicts {
		for i := start; i < len(v.Files); i++ {
			if v.Files[i].Path == c.Dropped {
				v.Files[i].Errors = append(v.Files[i].Errors, problem{Field: "metadata.name", Message: c.Error(), Text: c.Error()})
			}
		}
	}
	for _, f := range v.Files[start:] {
		if len(f.Errors) > 0 {
			v.Valid = false
		}
	}
}

func toProblems(ps []manifests.Problem) []problem {
	out := make([]problem, 0, len(ps))
	for _, p := range ps {
		out = append(out, problem{Document: p.Doc, Field: p.Field(), Message: p.Message(), Text: p.Error()})
	}
	return out
}

func writeJSONReport(w io.Writer, v validation) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTextReport prints one line per problem, then a summary line.
func writeTextReport(w io.Writer, v validation) error {
	var pods, bad, errs, warns int
	for _, f := range v.Files {
		for _, p := range f.Errors {
			fmt.Fprintf(w, "error: %s\n", p.Text)
		}
		for _, p := range f.Warnings {
			fmt.Fprintf(w, "warning: %s\n", p.Text)
		}
		pods += len(f.Pods)
		errs += len(f.Errors)
		warns += len(f.Warnings)
		if len(f.Errors) > 0 {
			bad++
		}
	}
	_, err := fmt.Fprintf(w, "checked %s: %s valid, %s invalid; %s, %s\n", count(len(v.Files), "file"),
		count(pods, "pod"), count(bad, "file"), count(errs, "error"), count(warns, "warning"))
	return err
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
