package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/app/internal/cmdline"
	"github.com/seckill-lab/seckill/app/server"
)

// TestTheCommandLineAnswersBeforeServing: help and version answer and
// exit 0; an unknown command or flag (a typo) is refused with status 2 and
// the usage; serve takes no arguments. None of them reaches the server
// (the stand-in serve records whether it ran).
func TestTheCommandLineAnswersBeforeServing(t *testing.T) {
	var served [][]string
	p := program
	p.Commands = []cmdline.Command{{Name: "serve", Summary: "serve the API", Run: func(args []string) int { served = append(served, args); return 0 }, Help: server.PrintVariables}}
	for _, c := range []struct {
		args     []string
		status   int
		stdout   string // a line it must contain
		stderr   string
		serveRan bool
	}{
		{args: []string{"-h"}, stdout: "Usage: seckill"},
		{args: []string{"--help"}, stdout: "serve"},
		{args: []string{"help"}, stdout: "version"},
		{args: []string{"--version"}, stdout: "seckill "},
		{args: []string{"version"}, stdout: " go1."},
		{args: []string{"--port=8080"}, status: 2, stderr: `unknown command or flag "--port=8080"`},
		{args: []string{"serv"}, status: 2, stderr: "Usage: seckill"},
		{args: []string{"compare"}, status: 2, stderr: `unknown command or flag "compare"`}, // the lab's, not the server's
		{args: nil, serveRan: true},
		{args: []string{"serve"}, serveRan: true},
		{args: []string{"serve", "-h"}, stdout: "SECKILL_CODES_PER_PHONE"},
		{args: []string{"serve", "--help"}, stdout: "SECKILL_QUEUE"},
	} {
		served = nil
		var stdout, stderr bytes.Buffer
		status := p.Run(c.args, &stdout, &stderr)
		if status != c.status || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) || (served != nil) != c.serveRan {
			t.Errorf("seckill %v: status %d, served %v\nstdout: %s\nstderr: %s", c.args, status, served != nil, stdout.String(), stderr.String())
		}
	}
	// The real serve refuses arguments before it reads any setting.
	if status := serve([]string{"-h2"}); status != 2 {
		t.Errorf("seckill serve -h2: status %d, want 2", status)
	}
}

// TestTheServerBinaryLinksNoLabTool: the labs are a program of their own
// (app/lab/seckill-lab); the server's binary links none of their packages
// or tools.
func TestTheServerBinaryLinksNoLabTool(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v (no Go toolchain here)", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, tool := range []string{"/app/lab", "porcupine", "franz-go/pkg/kfake", "testenv/faultproxy", "testenv/redistopology"} {
			if strings.Contains(pkg, tool) {
				t.Errorf("the server binary links %s", pkg)
			}
		}
	}
}

// TestTheHealthCommandAsksReadyz: `seckill health` is ready exactly when
// /readyz answers 200, on the address SECKILL_ADDR names (a host left out
// or a wildcard is this machine), and says why when it is not.
func TestTheHealthCommandAsksReadyz(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(status.Load()))
		fmt.Fprint(w, `{"status":"draining"}`)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	for _, addr := range []string{"127.0.0.1:" + port, ":" + port, "0.0.0.0:" + port} {
		status.Store(http.StatusServiceUnavailable)
		if err := checkReady(addr, time.Second); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "draining") {
			t.Errorf("%s answering 503: %v, want not ready with the answer", addr, err)
		}
		status.Store(http.StatusOK)
		if err := checkReady(addr, time.Second); err != nil {
			t.Errorf("%s answering 200: %v, want ready", addr, err)
		}
	}
	srv.Close()
	if err := checkReady("127.0.0.1:"+port, time.Second); err == nil {
		t.Error("nothing listening: ready")
	}
	if err := checkReady("no-port", time.Second); err == nil {
		t.Error("an address without a port: ready")
	}
}
