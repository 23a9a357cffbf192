// Package redistopology starts Redis topologies of a caller's own from the
// machine's redis-server binary, on free ports in the caller's temporary
// directory: one server to restart (empty, or from an old snapshot), and a
// Sentinel set whose primary can be killed with its replication held back.
// Tests use it through testing.TB; the comparison lab, which injects the
// same faults from the binary, through its own T.
package redistopology

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProcess is a redis-server of a test's own, on a free port, in the
// test's temporary directory, that the test restarts: empty (what a restart
// without persistence does) or from the snapshot it took (an old RDB).
// Under CI a missing redis-server binary fails the test.
type RedisProcess struct {
	t    T
	bin  string
	dir  string
	Port int
	cmd  *exec.Cmd
	// durable: every write is in the append-only file, fsynced, before
	// Redis answers it (StartDurableRedisProcess).
	durable bool
	// extra are further redis-server arguments (a cluster node's).
	extra []string
}

// StartRedisProcess starts one; it is killed when the test ends.
func StartRedisProcess(t T) *RedisProcess {
	t.Helper()
	bin := redisServer(t)
	p := &RedisProcess{t: t, bin: bin, dir: t.TempDir(), Port: freePort(t)}
	p.start()
	t.Cleanup(p.kill)
	return p
}

// StartDurableRedisProcess starts one that keeps every write it answered
// (appendonly, appendfsync always): a SIGKILL and Restart lose nothing,
// and still make a new incarnation (a new run_id) that the sale must
// verify against.
func StartDurableRedisProcess(t T) *RedisProcess {
	t.Helper()
	bin := redisServer(t)
	p := &RedisProcess{t: t, bin: bin, dir: t.TempDir(), Port: freePort(t), durable: true}
	p.start()
	t.Cleanup(p.kill)
	return p
}

// Restart kills the process (SIGKILL) and starts it again on the same
// port and files: a durable one comes back with everything, another with
// its last Snapshot, if any.
func (p *RedisProcess) Restart() {
	p.t.Helper()
	p.kill()
	p.start()
}

// Stop kills the process (SIGKILL) and leaves it down, its files kept,
// until Start: a server the sale cannot reach.
func (p *RedisProcess) Stop() {
	p.t.Helper()
	p.kill()
}

// Start starts a stopped process again on the same port and files (as
// Restart's second half).
func (p *RedisProcess) Start() {
	p.t.Helper()
	p.start()
}

// URL is the SECKILL_REDIS_URL of the process.
func (p *RedisProcess) URL() string { return "redis://127.0.0.1:" + strconv.Itoa(p.Port) + "/0" }

// Snapshot writes the current data to the process's RDB file (SAVE): what
// a restart from an old snapshot brings back.
func (p *RedisProcess) Snapshot() {
	p.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p.Port)})
	defer c.Close()
	if err := c.Save(context.Background()).Err(); err != nil {
		p.t.Fatalf("SAVE: %v", err)
	}
}

// RestartEmpty kills the process (SIGKILL) and starts a new one on the same
// port with nothing: the snapshot, if any, is removed first.
func (p *RedisProcess) RestartEmpty() {
	p.t.Helper()
	p.kill()
	os.Remove(filepath.Join(p.dir, "dump.rdb"))
	p.start()
}

// RestartFromSnapshot kills the process (SIGKILL) and starts a new one that
// loads the last Snapshot.
func (p *RedisProcess) RestartFromSnapshot() {
	p.t.Helper()
	if _, err := os.Stat(filepath.Join(p.dir, "dump.rdb")); err != nil {
		p.t.Fatalf("no snapshot to restart from: %v", err)
	}
	p.kill()
	p.start()
}

func (p *RedisProcess) start() {
	p.t.Helper()
	// --save "": no automatic snapshots, only the test's SAVE.
	aof := []string{"--appendonly", "no"}
	if p.durable {
		aof = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	p.cmd = exec.Command(p.bin, append([]string{"--port", strconv.Itoa(p.Port), "--bind", "127.0.0.1", "--dir", p.dir,
		"--save", "", "--dbfilename", "dump.rdb"}, append(aof, p.extra...)...)...)
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p.Port)})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			p.kill()
			p.t.Fatal(fmt.Errorf("redis-server on port %d did not start", p.Port))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *RedisProcess) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p.cmd = nil
}

// T is what the topologies need of their caller: testing.TB has it, and so
// can a program that is not a test.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Cleanup(func())
	TempDir() string
}

// InCI reports whether a missing real service must fail the tests.
func InCI() bool { v := os.Getenv("CI"); return v != "" && v != "0" && v != "false" }

// redisServer is the path of the machine's redis-server: without one the
// caller is skipped, or under CI fails.
func redisServer(t T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if InCI() {
			t.Fatal("redis-server is not on this machine; CI needs it")
		}
		t.Skip("no redis-server binary on this machine")
	}
	return bin
}
