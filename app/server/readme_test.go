package server

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

// TestTheREADMEWalkThroughWorksAsWritten runs the README's walk-through
// block with bash and curl, as written (only localhost:8080 becomes the
// test server's address), against the server its first block starts —
// `make run`'s: the stand-ins with their demo sale — and against the real
// servers started as its last block says (its settings read by the same
// LoadConfig, the database and Redis the test's own). Docs that are
// executed stay true: the walk-through once bought the demo's voucher 1
// instead of the one it had just created.
func TestTheREADMEWalkThroughWorksAsWritten(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(raw)[strings.Index(string(raw), "## Walk-through with curl"):]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	var blocks []string
	for rest := section; strings.Contains(rest, "```sh\n"); {
		rest = rest[strings.Index(rest, "```sh\n")+len("```sh\n"):]
		end := strings.Index(rest, "```")
		blocks, rest = append(blocks, rest[:end]), rest[end+3:]
	}
	if len(blocks) != 3 || strings.TrimSpace(blocks[0]) != "SECKILL_ADMIN_TOKEN=demo-admin-token-0123 make run" {
		t.Fatalf("the walk-through's blocks changed shape (start, client, real servers): %q", blocks)
	}
	walk := func(t *testing.T, h *harness, admin string) {
		script := strings.ReplaceAll(blocks[1], "localhost:8080", strings.TrimPrefix(h.base, "http://"))
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "ADMIN="+admin)
		out, err := cmd.CombinedOutput()
		text := string(out)
		for _, want := range []string{"already_purchased", `"status":"created"`, `"payBy"`, `"title":"100 off 80"`, `"stock":99`,
			`{"error":{"code":"paused"`, `"operator":"alice"`, `"state":"on_sale"`} {
			if !strings.Contains(text, want) {
				t.Errorf("the walk-through's output lacks %s", want)
			}
		}
		if err != nil || t.Failed() {
			t.Fatalf("the walk-through: %v\n%s", err, text)
		}
	}

	t.Run("make run", func(t *testing.T) {
		h := startServer(t, "embedded", func(c *Config) { c.AdminToken, c.DemoSale = "demo-admin-token-0123", true })
		walk(t, h, "")
	})
	t.Run("real servers", func(t *testing.T) {
		redisURL := os.Getenv(testenv.RedisURLEnv)
		dsn, ok := testenv.MySQLDatabase(t)
		if redisURL == "" || !ok {
			t.Skip("the real servers are not configured (CI sets them)")
		}
		block := blocks[2]
		if !strings.Contains(block, "CREATE DATABASE") || !strings.Contains(block, "go run ./app") {
			t.Fatalf("the real-server block no longer creates the database and starts the server: %s", block)
		}
		// The block's settings, as its shell makes them: the start line
		// prints them instead of serving, and the database line is left out
		// (the test has its own database).
		script := strings.Replace(block, "go run ./app", "env", 1)
		script = script[strings.Index(script, "\n")+1:]
		out, err := exec.Command("bash", "-euo", "pipefail", "-c", script).Output()
		if err != nil {
			t.Fatalf("the real-server block: %v", err)
		}
		vars := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "SECKILL_") {
				vars[k] = v
			}
		}
		vars["SECKILL_REDIS_URL"], vars["SECKILL_MYSQL_DSN"] = redisURL, dsn
		vars["SECKILL_ADDR"], vars["SECKILL_KEY_PREFIX"] = "127.0.0.1:0", "t"+testenv.RandomSuffix()+":"
		cfg, err := LoadConfig(env(vars))
		if err != nil {
			t.Fatalf("the real-server block's settings are refused: %v", err)
		}
		walk(t, startWith(t, cfg), cfg.AdminToken)
	})
}

// TestTheREADMECodeListenerAnswersAndPrints: the README's listener for
// reading codes without a gateway, run as written (on a free port), takes
// the webhook sender's codes: the code request is 200 and the listener
// prints the code. The tip before it (nc -l) never answered, so every code
// was withdrawn.
func TestTheREADMECodeListenerAnswersAndPrints(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(raw)[strings.Index(string(raw), "**Reading codes without a gateway.**"):]
	start := strings.Index(section, "```sh\n") + len("```sh\n")
	// The block sits in a list item: rendered, its lines lose the item's
	// indentation, and so they do here.
	var lines []string
	for _, l := range strings.Split(section[start:start+strings.Index(section[start:], "```")], "\n") {
		lines = append(lines, strings.TrimPrefix(l, "  "))
	}
	script := strings.Join(lines, "\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	script = strings.ReplaceAll(script, "9999", port)
	out := &lockedOutput{}
	cmd := exec.Command("bash", "-c", script)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	h := startServer(t, "embedded", func(c *Config) {
		c.DevCodes = false
		c.CodeSender, c.CodeWebhookURL, c.CodeWebhookSecret = WebhookSender, "http://127.0.0.1:"+port+"/sms", "a-listener-secret-0123"
	})
	var status int
	var body map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if status, body = h.do("POST", "/api/auth/code", "", map[string]any{"phone": "13811112222"}); status == 200 {
			break
		}
	}
	if status != 200 {
		t.Fatalf("a code through the README's listener: %d %v\n%s", status, body, out.String())
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), `"code":`) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), `"phone":"+8613811112222"`) || !strings.Contains(out.String(), `"code":`) {
		t.Fatalf("the listener printed %q, want the code", out.String())
	}
}

// lockedOutput collects a process's output while the test reads it.
type lockedOutput struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (o *lockedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *lockedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
