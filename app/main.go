// Command seckill serves the flash-sale API. With SECKILL_REDIS_URL and
// SECKILL_MYSQL_DSN unset it runs on embedded stand-ins; see README.md.
//
//	seckill [serve]   serve (the default); configured by SECKILL_* variables
//	seckill env       an environment file of every variable, with its default
//	seckill help      this list; seckill version: the build
//
// The labs (compare, lifecycle, bench) are a program of their own,
// app/lab/seckill-lab: nothing of them is linked into this binary.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/seckill-lab/seckill/app/internal/cmdline"
	"github.com/seckill-lab/seckill/app/server"
)

func main() {
	os.Exit(program.Run(os.Args[1:], os.Stdout, os.Stderr))
}

// program is the binary's commands.
var program = cmdline.Program{
	Name:  "seckill",
	Intro: "With SECKILL_REDIS_URL and SECKILL_MYSQL_DSN unset, the server runs on embedded stand-ins (miniredis, SQLite).",
	Commands: []cmdline.Command{
		{Name: "serve", Summary: "serve the API (the default); configured by SECKILL_* environment variables (seckill serve -h lists them)", Run: serve, Help: server.PrintVariables},
		{Name: "env", Summary: "print an environment file of every setting, commented out with its default: the start of a deployment's configuration", Run: printEnv},
	},
}

// printEnv writes the env template to stdout.
func printEnv(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "seckill env: takes no arguments (got %q)\n", strings.Join(args, " "))
		return 2
	}
	server.PrintEnvTemplate(os.Stdout)
	return 0
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
