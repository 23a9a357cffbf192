// Package cmdline is the subcommand dispatch the server's binary and the
// lab's share: help and version answered, anything unknown refused with
// exit status 2 before a command runs.
package cmdline

import (
	"fmt"
	"io"
	"runtime/debug"
)

// Command is one subcommand: Run gets the arguments after its name.
type Command struct {
	Name, Summary string
	Run           func(args []string) int
	// Help, if set, answers `<program> <name> -h` (a command without it
	// reads its own flags).
	Help func(w io.Writer)
}

// Program is a binary's commands; the first runs when none is named,
// unless RequireCommand. Commands without a Summary (helper processes) are
// not listed.
type Program struct {
	Name           string
	Intro          string
	Commands       []Command
	RequireCommand bool
}

// Run dispatches args to a command, or answers help and version itself.
func (p Program) Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		if p.RequireCommand {
			p.Usage(stderr)
			return 2
		}
		return p.Commands[0].Run(nil)
	}
	switch {
	case isHelp(args[0]):
		p.Usage(stdout)
		return 0
	case args[0] == "version" || args[0] == "-version" || args[0] == "--version":
		fmt.Fprintln(stdout, Version(p.Name))
		return 0
	}
	for _, c := range p.Commands {
		if c.Name != args[0] {
			continue
		}
		if len(args) == 2 && c.Help != nil && isHelp(args[1]) {
			c.Help(stdout)
			return 0
		}
		return c.Run(args[1:])
	}
	fmt.Fprintf(stderr, "%s: unknown command or flag %q\n\n", p.Name, args[0])
	p.Usage(stderr)
	return 2
}

func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}

// Usage lists the program's commands.
func (p Program) Usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s [command] [flags]\n\n", p.Name)
	if p.Intro != "" {
		fmt.Fprintf(w, "%s\n\n", p.Intro)
	}
	fmt.Fprintln(w, "Commands:")
	for _, c := range p.Commands {
		if c.Summary != "" {
			fmt.Fprintf(w, "  %-10s %s\n", c.Name, c.Summary)
		}
	}
	fmt.Fprintf(w, "  %-10s %s\n", "help", "this list (also -h, --help)")
	fmt.Fprintf(w, "  %-10s %s\n", "version", "the build: module version, commit and Go version (also --version)")
}

// Version is the build as Go recorded it: the module version (a tagged
// `go install`), else the commit it was built from.
func Version(name string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return name + " (no build information)"
	}
	var commit, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+changes"
			}
		}
	}
	out := name + " " + info.Main.Version
	if commit != "" {
		out += " (commit " + commit[:min(12, len(commit))] + modified + ")"
	}
	return out + " " + info.GoVersion
}
