package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"
)

// ManSection is the section of staticpod's man pages: system administration commands.
const ManSection = 8

// Man is the hidden man command, which make man runs: it writes staticpod(8), every
// visible command with its flags, and one page per command, staticpod-COMMAND(8), from
// the app's own definitions.
func Man() *cli.Command {
	return &cli.Command{
		Name:      "man",
		Usage:     "write the man pages into DIR (make man runs it)",
		ArgsUsage: "DIR",
		Hidden:    true,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("man: name the directory to write the pages into", ExitUsage)
			}
			pages, err := ManPages(c.App)
			if err != nil {
				return err
			}
			dir := c.Args().First()
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("write man pages: %w", err)
			}
			for name, page := range pages {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(page), 0o644); err != nil {
					return fmt.Errorf("write man pages: %w", err)
				}
			}
			return nil
		},
	}
}

// ManPages renders app's man pages, by file name: NAME.8 for the app and NAME-COMMAND.8
// for each command it shows in --help.
func ManPages(app *cli.App) (map[string]string, error) {
	pages := map[string]string{}
	page, err := app.ToManWithSection(ManSection)
	if err != nil {
		return nil, fmt.Errorf("render man page %s: %w", app.Name, err)
	}
	pages[fmt.Sprintf("%s.%d", app.Name, ManSection)] = page
	for _, c := range app.VisibleCommands() {
		if c.Name == "help" {
			continue // urfave/cli's own, of no use in a page
		}
		name := app.Name + "-" + c.Name
		usage := fmt.Sprintf("%s %s [options]", app.Name, c.Name)
		if c.ArgsUsage != "" {
			usage += " " + c.ArgsUsage
		}
		desc := c.Description
		if desc != "" {
			desc += "\n\n"
		}
		desc += fmt.Sprintf("See %s(%d) for every command.", app.Name, ManSection)
		sub := &cli.App{Name: name, Usage: c.Usage, UsageText: usage, Description: desc, Flags: c.VisibleFlags(), HideHelp: true}
		page, err := sub.ToManWithSection(ManSection)
		if err != nil {
			return nil, fmt.Errorf("render man page %s: %w", name, err)
		}
		pages[fmt.Sprintf("%s.%d", name, ManSection)] = page
	}
	return pages, nil
}
