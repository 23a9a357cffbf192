// Package deploy_test holds the deployment's own tests: the image built
// and run as a team would run it.
package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/app/server"
)

// TestTheImageRunsAndSells: `make image` builds the image with podman from
// nothing pulled; run as this machine can (runc, the host's network) on the
// real Redis and MariaDB, it becomes ready, its health command says so, it
// sells a voucher through its own API and persists the order, and a stop
// (SIGTERM) ends it with status 0 within the 10 s it is given.
func TestTheImageRunsAndSells(t *testing.T) {
	if testing.Short() {
		t.Skip("the image is built and run outside -short")
	}
	podman := containerTool(t)
	redis, ok := testenv.RealRedis(t)
	dsn, ok2 := testenv.MySQLDatabase(t)
	if !ok || !ok2 {
		t.Skip("the image runs against the real servers; they are not set here")
	}
	image := "localhost/seckill-test:" + testenv.RandomSuffix()
	run(t, "make", "-C", "..", "image", "IMAGE="+image, "CONTAINER="+podman)
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", image).Run() })

	addr := freeAddr(t)
	const jwt, admin = "image-test-jwt-0123456789abcdef", "image-test-admin-0123456789"
	name := "seckill-test-" + testenv.RandomSuffix()
	run(t, podman, "--runtime", "runc", "run", "-d", "--name", name, "--network", "host",
		"-e", "SECKILL_ADDR="+addr, "-e", "SECKILL_REDIS_URL="+os.Getenv(testenv.RedisURLEnv), "-e", "SECKILL_MYSQL_DSN="+dsn,
		"-e", "SECKILL_KEY_PREFIX="+redis.Prefix, "-e", "SECKILL_JWT_SECRET="+jwt, "-e", "SECKILL_ADMIN_TOKEN="+admin, image)
	t.Cleanup(func() { exec.Command(podman, "rm", "-f", name).Run() })
	base := "http://" + addr
	waitReady(t, podman, name, base)
	if out := run(t, podman, "exec", name, "/seckill", "health"); !strings.Contains(out, "ready") {
		t.Errorf("seckill health in the container: %q", out)
	}
	if out := run(t, podman, "exec", name, "/seckill", "version"); !strings.Contains(out, "commit") {
		t.Errorf("seckill version in the image names no commit: %q", out)
	}
	buyThrough(t, base, jwt, admin)

	start := time.Now()
	run(t, podman, "stop", "-t", "10", name)
	status := strings.TrimSpace(run(t, podman, "inspect", "--format", "{{.State.ExitCode}}", name))
	if took := time.Since(start); status != "0" || took > 10*time.Second {
		t.Fatalf("stopped with status %s after %v; want 0 within 10s\n%s", status, took, logs(podman, name))
	}
}

// containerTool is podman, with the configuration this sandbox needs
// (crun's rlimits are refused: no default ulimits). Outside CI a machine
// without it skips; CI installs it.
func containerTool(t *testing.T) string {
	path, err := exec.LookPath("podman")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("podman is not installed; .ci/run installs it (Debian's podman and runc)")
		}
		t.Skip("no podman on this machine")
	}
	if os.Getenv("CONTAINERS_CONF") == "" {
		conf := filepath.Join(t.TempDir(), "containers.conf")
		if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("CONTAINERS_CONF", conf)
	}
	return path
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func logs(podman, name string) string {
	out, _ := exec.Command(podman, "logs", name).CombinedOutput()
	return string(out)
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitReady waits for /readyz 200 (a minute: the schema is applied and
// the scripts loaded at start).
func waitReady(t *testing.T, podman, name, base string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("the container never became ready\n%s", logs(podman, name))
}

// buyThrough opens a voucher through the admin API, buys it as a shopper
// and waits for the order to be persisted.
func buyThrough(t *testing.T, base, jwt, admin string) {
	t.Helper()
	now := time.Now().UTC()
	voucher := struct {
		ID int64 `json:"id"`
	}{}
	call(t, "POST", base+"/api/admin/vouchers", "Bearer "+admin, map[string]any{"title": "image", "payValue": 100, "actualValue": 200,
		"stock": 5, "beginTime": now.Add(-time.Minute), "endTime": now.Add(time.Hour)}, http.StatusCreated, &voucher)
	token, err := server.NewTokens([]byte(jwt), 0).Issue(42, now)
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(voucher.ID, 10)
	var order struct {
		OrderID string `json:"orderId"`
	}
	call(t, "POST", base+"/api/vouchers/"+id+"/seckill", "Bearer "+token, nil, http.StatusOK, &order)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var got struct {
			OrderID string `json:"orderId"`
			Status  string `json:"status"`
		}
		call(t, "GET", base+"/api/vouchers/"+id+"/order", "Bearer "+token, nil, http.StatusOK, &got)
		if got.OrderID == order.OrderID && got.Status == "created" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s is %q after 20 s, want created (persisted)", order.OrderID, got.Status)
		}
	}
}

func call(t *testing.T, method, url, auth string, body any, want int, into any) {
	t.Helper()
	var payload []byte
	if body != nil {
		payload, _ = json.Marshal(body)
	}
	req, _ := http.NewRequestWithContext(context.Background(), method, url, bytes.NewReader(payload))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	raw.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, raw.String(), want)
	}
	if err := json.Unmarshal(raw.Bytes(), into); err != nil {
		t.Fatal(fmt.Errorf("%s %s: %w: %s", method, url, err, raw.String()))
	}
}
