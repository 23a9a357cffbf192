package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seckill-lab/seckill/app/server"
)

// TestTheCommandLineAnswersBeforeServing: help and version answer and
// exit 0; an unknown command or flag (a typo) is refused with status 2 and
// the usage; serve takes no arguments. None of them reaches the server
// (the stand-in serve records whether it ran).
func TestTheCommandLineAnswersBeforeServing(t *testing.T) {
	var served [][]string
	cmds := append([]command{{"serve", "serve the API", func(args []string) int { served = append(served, args); return 0 }, server.PrintVariables}}, commands[1:]...)
	for _, c := range []struct {
		args     []string
		status   int
		stdout   string // a line it must contain
		stderr   string
		serveRan bool
	}{
		{args: []string{"-h"}, stdout: "Usage: seckill"},
		{args: []string{"--help"}, stdout: "lifecycle"},
		{args: []string{"help"}, stdout: "version"},
		{args: []string{"--version"}, stdout: "seckill "},
		{args: []string{"version"}, stdout: " go1."},
		{args: []string{"--port=8080"}, status: 2, stderr: `unknown command or flag "--port=8080"`},
		{args: []string{"serv"}, status: 2, stderr: "Usage: seckill"},
		{args: nil, serveRan: true},
		{args: []string{"serve"}, serveRan: true},
		{args: []string{"serve", "-h"}, stdout: "SECKILL_CODES_PER_PHONE"},
		{args: []string{"serve", "--help"}, stdout: "SECKILL_QUEUE"},
	} {
		served = nil
		var stdout, stderr bytes.Buffer
		status := run(c.args, &stdout, &stderr, cmds)
		if status != c.status || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) || (served != nil) != c.serveRan {
			t.Errorf("seckill %v: status %d, served %v\nstdout: %s\nstderr: %s", c.args, status, served != nil, stdout.String(), stderr.String())
		}
	}
	if strings.Contains(func() string { var b bytes.Buffer; usage(&b, commands); return b.String() }(), "bare-handler") {
		t.Error("the bench's helper processes are listed in the help")
	}
	// The real serve refuses arguments before it reads any setting.
	if status := serve([]string{"-h2"}); status != 2 {
		t.Errorf("seckill serve -h2: status %d, want 2", status)
	}
}
