package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
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

// TestAWrongRedisPortIsOneClearLine: a server given a Redis that does not
// answer exits 1 with one line saying so, not go-redis's dial warnings
// before it (a new user's run printed four).
func TestAWrongRedisPortIsOneClearLine(t *testing.T) {
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skip("the start's errors are checked on the real MySQL")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens there now
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=server", "SECKILL_ADDR=127.0.0.1:0", "SECKILL_REDIS_URL=redis://"+closed+"/0",
		"SECKILL_MYSQL_DSN="+dsn, "SECKILL_JWT_SECRET="+testenv.Secret(), "SECKILL_ADMIN_TOKEN="+testenv.Secret())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the server with a closed Redis port: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "cannot reach Redis at "+closed) {
		t.Fatalf("the server with a closed Redis port said %d lines, want the one clear line:\n%s", len(lines), out)
	}
}
