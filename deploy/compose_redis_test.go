package deploy_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

// The compose file's Redis services, data nodes first.
var (
	redisNodes     = []string{"redis", "redis-replica-1", "redis-replica-2"}
	redisSentinels = []string{"sentinel-1", "sentinel-2", "sentinel-3"}
)

// TestTheComposeRedisRunsHere: no image can be pulled here, but the compose
// file's Redis is the host's redis-server run as compose.yaml says: the
// primary and the two replicas with their commands, the three sentinels with
// their configuration (each service name read as 127.0.0.1, on a port of
// its own). The replicas follow the primary; every sentinel names it, sees
// both replicas and reaches its quorum; and an instance's SECKILL_REDIS_URL
// reaches the primary through them and has a write confirmed by a replica
// (WAIT 1, what SECKILL_REDIS_WAIT_REPLICAS=1 asks of each reservation),
// with the passwords of deploy/.env: a client without them is refused.
func TestTheComposeRedisRunsHere(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if redistopology.InCI() {
			t.Fatal("redis-server is not on this machine; CI needs it")
		}
		t.Skip("no redis-server binary on this machine")
	}
	p, err := loadCompose(t, composeSecrets)
	if err != nil {
		t.Fatal(err)
	}
	local := newLocalRedis(t, bin)
	for _, name := range redisNodes {
		cmd := p.Services[name].Command
		if len(cmd) == 0 || cmd[0] != "redis-server" {
			t.Fatalf("%s runs %v, not redis-server", name, cmd)
		}
		local.start(name, append(local.localize(cmd[1:]), "--port", local.port(name), "--bind", "127.0.0.1", "--dir", t.TempDir())...)
	}
	for _, name := range redisSentinels {
		local.start(name, local.sentinelConfig(name, sentinelConf(t, p, name)), "--sentinel")
	}
	local.waitForQuorum(monitoredName(t, p))

	url := *instances(p)[0].Environment["SECKILL_REDIS_URL"]
	opts, err := redis.ParseFailoverURL(url)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range opts.SentinelAddrs {
		host, _, _ := net.SplitHostPort(a)
		opts.SentinelAddrs[i] = "127.0.0.1:" + local.port(host)
	}
	client := redis.NewFailoverClient(opts)
	defer client.Close()
	ctx := context.Background()
	// Every node and sentinel refuses a client without the password.
	for _, name := range []string{"redis", "redis-replica-1", "sentinel-1"} {
		anon := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + local.port(name)})
		err := anon.Ping(ctx).Err()
		anon.Close()
		if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Errorf("%s answered a client without the password: %v", name, err)
		}
	}
	if err := client.Set(ctx, "compose-test", "1", 0).Err(); err != nil {
		t.Fatalf("a write through %s: %v", url, err)
	}
	if n, err := client.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n < 1 {
		t.Errorf("WAIT 1 after a write through the sentinels: %d replicas confirmed, %v", n, err)
	}
}

// localRedis runs the compose file's Redis services on this machine.
type localRedis struct {
	t     *testing.T
	bin   string
	ports map[string]string // by service name
	// exited is closed, by service name, when its process has ended.
	exited map[string]chan struct{}
}

func newLocalRedis(t *testing.T, bin string) *localRedis {
	l := &localRedis{t: t, bin: bin, ports: map[string]string{}, exited: map[string]chan struct{}{}}
	for _, name := range append(slices.Clone(redisNodes), redisSentinels...) {
		_, l.ports[name], _ = net.SplitHostPort(freeAddr(t))
	}
	return l
}

func (l *localRedis) port(service string) string {
	p, ok := l.ports[service]
	if !ok {
		l.t.Fatalf("%s is not one of the compose file's Redis services", service)
	}
	return p
}

// localize reads each service name among words as 127.0.0.1, and the
// port after it (compose's 6379 or 26379) as the service's own here.
func (l *localRedis) localize(words []string) []string {
	out := slices.Clone(words)
	for i, w := range out {
		if p, ok := l.ports[w]; ok {
			out[i] = "127.0.0.1"
			if i+1 < len(out) && (out[i+1] == "6379" || out[i+1] == "26379") {
				out[i+1] = p
			}
		}
	}
	return out
}

// sentinelConfig writes the compose file's sentinel configuration for the
// sentinel called name, localized, in a directory of its own.
func (l *localRedis) sentinelConfig(name, content string) string {
	dir := l.t.TempDir()
	var lines []string
	for _, line := range strings.Split(content, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "port":
			f[1] = l.port(name)
		case len(f) == 2 && f[0] == "dir":
			f[1] = dir
		}
		lines = append(lines, strings.Join(l.localize(f), " "))
	}
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(strings.Join(append(lines, "bind 127.0.0.1"), "\n")), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return path
}

func (l *localRedis) start(name string, args ...string) {
	cmd := exec.Command(l.bin, args...)
	out, err := os.Create(filepath.Join(l.t.TempDir(), name+".log"))
	if err != nil {
		l.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	exited := make(chan struct{})
	l.exited[name] = exited
	go func() { cmd.Wait(); close(exited) }()
	l.t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if l.t.Failed() {
			log, _ := os.ReadFile(out.Name())
			l.t.Logf("%s %v:\n%s", name, args, log)
		}
	})
}

// waitForQuorum waits until the replicas follow the primary and every
// sentinel names the primary, sees both replicas and reaches its quorum.
func (l *localRedis) waitForQuorum(master string) {
	ctx := context.Background()
	var last string
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if last = l.notReady(ctx, master); last == "" {
			return
		}
	}
	l.t.Fatalf("the compose file's Redis did not come together: %s", last)
}

// notReady says what is not yet as waitForQuorum wants it ("" when all is).
func (l *localRedis) notReady(ctx context.Context, master string) string {
	for name, exited := range l.exited {
		select {
		case <-exited:
			l.t.Fatalf("%s stopped", name)
		default:
		}
	}
	for _, name := range redisNodes[1:] {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + l.port(name), Password: composeSecrets["REDIS_PASSWORD"]})
		info, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return name + " does not follow the primary yet"
		}
	}
	for _, name := range redisSentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + l.port(name), Password: composeSecrets["REDIS_PASSWORD"]})
		addr, err := sc.GetMasterAddrByName(ctx, master).Result()
		replicas, err2 := sc.Replicas(ctx, master).Result()
		quorum, err3 := sc.CkQuorum(ctx, master).Result()
		sc.Close()
		switch {
		case err != nil || len(addr) != 2 || addr[1] != l.port("redis"):
			return name + " does not name the primary: " + strings.Join(addr, ":")
		case err2 != nil || len(replicas) != 2:
			return name + " does not see both replicas"
		case err3 != nil:
			return name + ": " + err3.Error() + " " + quorum
		}
	}
	return ""
}
