// Command seckill serves the flash-sale API. With SECKILL_REDIS_URL and
// SECKILL_MYSQL_DSN unset it runs on embedded stand-ins; see README.md.
//
//	seckill [serve]   serve (the default); configured by SECKILL_* variables
//	seckill env       an environment file of every variable, with its default
//	seckill health    0 when the server at SECKILL_ADDR answers /readyz 200
//	seckill deadletters list|show|redrive|discard   an instance's dead letters
//	seckill sale pause|resume|end|stock|kill|revive|actions   steer a running sale
//	seckill help      this list; seckill version: the build
//
// The labs (compare, lifecycle, bench) are a program of their own,
// app/lab/seckill-lab: nothing of them is linked into this binary.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

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
		{Name: "health", Summary: "ask the server at SECKILL_ADDR whether it is ready (GET /readyz): exit 0 if so, 1 if not; an image's HEALTHCHECK", Run: health},
		{Name: "env", Summary: "print an environment file of every setting, commented out with its default: the start of a deployment's configuration", Run: printEnv},
		{Name: "deadletters", Summary: "list, show, re-drive or discard a running instance's dead letters (seckill deadletters -h)", Run: deadLetters},
		{Name: "sale", Summary: "pause, resume or end a running sale, change its stock, the kill switch, the record of actions (seckill sale -h)", Run: sale},
	},
}

// health asks the server this environment configures whether it is
// ready: a container's health check, run inside the container beside the
// server (an image from scratch has no curl). It reads SECKILL_ADDR alone,
// so it answers even where the rest of the configuration would not load.
func health(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "seckill health: takes no arguments (got %q)\n", strings.Join(args, " "))
		return 2
	}
	if err := checkReady(os.Getenv("SECKILL_ADDR"), 3*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "seckill health:", err)
		return 1
	}
	fmt.Println("ready")
	return 0
}

// checkReady GETs /readyz on the API's listen address (":8080" when
// empty; a host left out is this machine) and wants 200.
func checkReady(addr string, timeout time.Duration) error {
	if strings.Contains(addr, "://") {
		return fmt.Errorf("SECKILL_ADDR=%q: want host:port", addr)
	}
	base, err := baseURL(addr)
	if err != nil {
		return fmt.Errorf("SECKILL_ADDR=%q: want host:port", addr)
	}
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
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
