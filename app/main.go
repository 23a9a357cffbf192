// Command seckill serves the flash-sale API. With SECKILL_REDIS_URL and
// SECKILL_MYSQL_DSN unset it runs on embedded stand-ins; see README.md.
//
//	seckill [serve]   serve (the default); configured by SECKILL_* variables
//	seckill compare   the comparison lab: the same sale on every backend
//	seckill lifecycle the lifecycle lab: expiry, resale and its races (real servers)
//	seckill bench     the load run that prints each ratio against its baseline
//	seckill help      this list; seckill version: the build
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/seckill-lab/seckill/app/lab"
	"github.com/seckill-lab/seckill/app/server"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, commands))
}

// command is one subcommand: run gets the arguments after its name.
type command struct {
	name, summary string
	run           func(args []string) int
	// help, if set, answers `seckill <name> -h` (a command without it
	// reads its own flags).
	help func(w io.Writer)
}

// commands are the binary's subcommands, in the order help lists them;
// the bench's own helper processes are not listed (the bench starts them).
var commands = []command{
	{"serve", "serve the API (the default); configured by SECKILL_* environment variables (seckill serve -h lists them)", serve, server.PrintVariables},
	{"compare", "the comparison lab: the same sale on every backend, measured (seckill compare -h)", lab.RunCompare, nil},
	{"lifecycle", "the lifecycle lab: expiry, resale and the races after the reservation, real servers only (seckill lifecycle -h)", lab.RunLifecycle, nil},
	{"bench", "the load run that prints each ratio against its baseline, real servers only (seckill bench -h)", lab.RunBench, nil},
	{lab.BareHandlerCommand, "", func([]string) int { return lab.RunBareHandler() }, nil},
	{lab.NaiveHandlerCommand, "", func([]string) int { return lab.RunNaiveHandler() }, nil},
}

// serve runs the server; it takes no arguments (its settings are the
// environment's, so a typo'd flag never starts a server on defaults).
func serve(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "seckill serve: takes no arguments (got %q); settings are SECKILL_* environment variables (seckill serve -h)\n", strings.Join(args, " "))
		return 2
	}
	return server.Main()
}

// run dispatches args to a subcommand, or answers help and version
// itself; anything it does not know is refused with exit status 2 before
// a port is taken.
func run(args []string, stdout, stderr io.Writer, cmds []command) int {
	if len(args) == 0 {
		return cmds[0].run(nil)
	}
	switch {
	case isHelp(args[0]):
		usage(stdout, cmds)
		return 0
	case args[0] == "version" || args[0] == "-version" || args[0] == "--version":
		fmt.Fprintln(stdout, version())
		return 0
	}
	for _, c := range cmds {
		if c.name != args[0] {
			continue
		}
		if len(args) == 2 && c.help != nil && isHelp(args[1]) {
			c.help(stdout)
			return 0
		}
		return c.run(args[1:])
	}
	fmt.Fprintf(stderr, "seckill: unknown command or flag %q\n\n", args[0])
	usage(stderr, cmds)
	return 2
}

func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}

func usage(w io.Writer, cmds []command) {
	fmt.Fprintln(w, "Usage: seckill [command] [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "With SECKILL_REDIS_URL and SECKILL_MYSQL_DSN unset, the server runs on embedded stand-ins (miniredis, SQLite).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range cmds {
		if c.summary != "" {
			fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintf(w, "  %-10s %s\n", "help", "this list (also -h, --help)")
	fmt.Fprintf(w, "  %-10s %s\n", "version", "the build: module version, commit and Go version (also --version)")
}

// version is the build as Go recorded it: the module version (a tagged
// `go install`), else the commit it was built from.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "seckill (no build information)"
	}
	v := info.Main.Version
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
	out := "seckill " + v
	if commit != "" {
		out += " (commit " + commit[:min(12, len(commit))] + modified + ")"
	}
	return out + " " + info.GoVersion
}
