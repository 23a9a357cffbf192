package server

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

// TestARedisThatMayEvictIsRefusedUnlessAllowed: an eviction deletes sale
// state under an unchanged run_id (buyers sold twice, accepted orders
// lost), so the server looks at every master's maxmemory-policy (INFO, not
// CONFIG) and will not start on one that may evict unless the operator
// says so; allowed, it starts and reports the masters in /metrics.
func TestARedisThatMayEvictIsRefusedUnlessAllowed(t *testing.T) {
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	proc := redistopology.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(proc.URL(), "redis://"), "/0")})
	defer rdb.Close()
	for _, policy := range []string{"allkeys-lru", "volatile-ttl"} {
		if err := rdb.ConfigSet(context.Background(), "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig()
		cfg.RedisURL, cfg.MySQLDSN = proc.URL(), dsn
		_, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil || !strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), "SECKILL_REDIS_ALLOW_EVICTION") {
			t.Fatalf("start on a Redis with maxmemory-policy %s: %v; want a refusal naming the policy and the override", policy, err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("the refusal is not one line: %q", err)
		}
	}
	cfg := testConfig()
	cfg.RedisURL, cfg.MySQLDSN, cfg.AllowEviction = proc.URL(), dsn, true
	h := startWith(t, cfg)
	if line := grepLines(h.metricsText(), "seckill_redis_evicting_masters{"); !strings.HasSuffix(line, "} 1") {
		t.Fatalf("allowed to evict, /metrics does not count the evicting master: %q", line)
	}
	status, body := h.do("GET", "/api/dashboard", h.cfg.AdminToken, nil)
	r, _ := body["redis"].(map[string]any)
	if evicting, _ := r["evicting"].([]any); status != 200 || len(evicting) != 1 || !strings.Contains(evicting[0].(string), "volatile-ttl") {
		t.Fatalf("allowed to evict, the dashboard says %d %v; want the master and its policy", status, body["redis"])
	}
	if err := rdb.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	cfg.AllowEviction = false
	startWith(t, cfg) // noeviction: starts without the override
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
