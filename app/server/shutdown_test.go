package server

import (
	"bufio"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMStopsCleanlyWithinTenSeconds runs the real main (this test
// binary re-executed as the server), sends SIGTERM while it serves, and
// wants exit status 0 within 10s.
func TestSIGTERMStopsCleanlyWithinTenSeconds(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=server", "SECKILL_ADDR=127.0.0.1:0")
	for _, k := range []string{"SECKILL_REDIS_URL", "SECKILL_MYSQL_DSN", "SECKILL_QUEUE"} {
		cmd.Env = append(cmd.Env, k+"=")
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	var logLines []string
	lines := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			lines <- s.Text()
			if i := strings.Index(s.Text(), "addr="); i >= 0 && strings.Contains(s.Text(), "msg=serving") {
				addr <- strings.Fields(s.Text()[i+5:])[0]
			}
		}
		close(lines)
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("server did not start")
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for l := range lines {
			logLines = append(logLines, l)
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("exit status %d after SIGTERM, want 0; log:\n%s", exit.ExitCode(), strings.Join(logLines, "\n"))
		} else if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running 10s after SIGTERM")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %v to stop", took)
	}
	if !strings.Contains(strings.Join(logLines, "\n"), "stopped cleanly") {
		t.Fatalf("no clean stop in the log:\n%s", strings.Join(logLines, "\n"))
	}
}
