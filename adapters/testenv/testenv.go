// Package testenv gives tests the services they run against: always the
// embedded stand-ins, and the real Redis and MySQL when
// SECKILL_TEST_REDIS_URL and SECKILL_TEST_MYSQL_DSN name them. Under CI
// (CI=true) a missing or unreachable real service fails the test instead of
// being skipped, so a green CI always means both targets ran.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

const (
	// RedisURLEnv names the real Redis of the tests.
	RedisURLEnv = "SECKILL_TEST_REDIS_URL"
	// MySQLDSNEnv names the real MySQL server; tests create a database of
	// their own on it and drop it afterwards.
	MySQLDSNEnv = "SECKILL_TEST_MYSQL_DSN"
)

// InCI reports whether a missing real service must fail the tests.
func InCI() bool { return redistopology.InCI() }

// Redis is one Redis a test runs against.
type Redis struct {
	Name   string // "miniredis", "redis" or "cluster"
	Client redis.UniversalClient
	// Mini is the embedded server (nil for real Redis), for tests that
	// move its clock.
	Mini *miniredis.Miniredis
	// Prefix is unique to the test: keys under it belong to the test alone,
	// so tests share a real Redis without flushing it.
	Prefix string
}

// Real reports whether this is a real Redis server.
func (r Redis) Real() bool { return r.Mini == nil }

// ForEachRedis runs fn as a subtest against each Redis target.
func ForEachRedis(t *testing.T, fn func(t *testing.T, r Redis)) {
	t.Helper()
	for _, name := range []string{"miniredis", "redis"} {
		t.Run(name, func(t *testing.T) {
			var r Redis
			var ok bool
			if name == "miniredis" {
				r, ok = Miniredis(t), true
			} else {
				r, ok = RealRedis(t)
			}
			if !ok {
				t.Skipf("%s is not set: real Redis not tested (CI sets it)", RedisURLEnv)
			}
			fn(t, r)
		})
	}
}

// ForEachRedisAndCluster is ForEachRedis with a third target: the Redis
// Cluster SECKILL_TEST_REDIS_CLUSTER_URL names (required under CI). The
// keys a test gives one script call must then share a slot.
func ForEachRedisAndCluster(t *testing.T, fn func(t *testing.T, r Redis)) {
	t.Helper()
	ForEachRedis(t, fn)
	t.Run("cluster", func(t *testing.T) {
		c, ok := RealCluster(t)
		if !ok {
			t.Skipf("%s is not set: Redis Cluster not tested (CI sets it)", ClusterURLEnv)
		}
		fn(t, Redis{Name: "cluster", Client: c.Client, Prefix: c.Prefix})
	})
}

// Miniredis starts an embedded Redis for the test.
func Miniredis(t testing.TB) Redis {
	t.Helper()
	m := miniredis.RunT(t)
	m.ClockTTL(true)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return Redis{Name: "miniredis", Client: c, Mini: m, Prefix: "t" + RandomSuffix() + ":"}
}

// RealRedis connects to SECKILL_TEST_REDIS_URL; ok is false when it is not
// set outside CI. Keys under the test's prefix are deleted afterwards.
func RealRedis(t testing.TB) (Redis, bool) {
	t.Helper()
	url := os.Getenv(RedisURLEnv)
	if url == "" {
		if InCI() {
			t.Fatalf("%s must be set in CI", RedisURLEnv)
		}
		return Redis{}, false
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("%s: %v", RedisURLEnv, err)
	}
	c := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("real Redis at %s does not answer: %v", opts.Addr, err)
	}
	r := Redis{Name: "redis", Client: c, Prefix: "t" + RandomSuffix() + ":"}
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, r.Prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		c.Close()
	})
	return r, true
}

// MySQLDatabase creates a fresh database on SECKILL_TEST_MYSQL_DSN and
// returns a DSN for it; ok is false when it is not set outside CI. The
// database is dropped when the test ends.
func MySQLDatabase(t testing.TB) (dsn string, ok bool) {
	t.Helper()
	base := os.Getenv(MySQLDSNEnv)
	if base == "" {
		if InCI() {
			t.Fatalf("%s must be set in CI", MySQLDSNEnv)
		}
		return "", false
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("%s: %v", MySQLDSNEnv, err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "seckill_t_" + RandomSuffix()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("real MySQL at %s: create database: %v", cfg.Addr, err)
	}
	t.Cleanup(func() {
		admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
		admin.Close()
	})
	cfg.DBName = name
	cfg.ParseTime = true
	return cfg.FormatDSN(), true
}

// RandomSuffix is 8 random hex digits.
func RandomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Secret is 32 random bytes in hex: a secret as real deployments must set
// (SECKILL_JWT_SECRET, SECKILL_ADMIN_TOKEN), new for each call.
func Secret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ClusterURLEnv names a Redis Cluster for the tests, in go-redis's
// cluster form (redis://host:port?addr=host:port&addr=…); .ci/run starts
// one with .ci/redis-cluster.
const ClusterURLEnv = "SECKILL_TEST_REDIS_CLUSTER_URL"

// Cluster is a real Redis Cluster a test runs against.
type Cluster struct {
	URL    string
	Client *redis.ClusterClient
	// Prefix is unique to the test; its keys are deleted afterwards.
	Prefix string
}

// RealCluster connects to SECKILL_TEST_REDIS_CLUSTER_URL; ok is false when
// it is not set outside CI (under CI it must be).
func RealCluster(t testing.TB) (Cluster, bool) {
	t.Helper()
	url := os.Getenv(ClusterURLEnv)
	if url == "" {
		if InCI() {
			t.Fatalf("%s must be set in CI (.ci/run starts a cluster)", ClusterURLEnv)
		}
		return Cluster{}, false
	}
	opts, err := redis.ParseClusterURL(url)
	if err != nil {
		t.Fatalf("%s: %v", ClusterURLEnv, err)
	}
	c := redis.NewClusterClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis Cluster at %s does not answer: %v", url, err)
	}
	cl := Cluster{URL: url, Client: c, Prefix: "t" + RandomSuffix() + ":"}
	t.Cleanup(func() {
		ctx := context.Background()
		c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			iter := node.Scan(ctx, 0, cl.Prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				node.Del(ctx, iter.Val())
			}
			return nil
		})
		c.Close()
	})
	return cl, true
}

// The outside brokers' tests read their servers from these; unset outside
// CI, a test runs on its stand-in (an embedded NATS server, kfake).
const (
	NATSURLEnv      = "SECKILL_TEST_NATS_URL"
	AMQPURLEnv      = "SECKILL_TEST_AMQP_URL"
	KafkaBrokersEnv = "SECKILL_TEST_KAFKA_BROKERS"
)

// BrokerURL is the broker env names: "" when it is unset outside CI (the
// test then runs its stand-in); under CI an unset one fails the test, so a
// green CI means the real broker was tested.
func BrokerURL(t testing.TB, env string) string {
	t.Helper()
	url := os.Getenv(env)
	if url == "" && InCI() {
		t.Fatalf("%s must be set in CI (.ci/run sets it and starts the broker)", env)
	}
	return url
}

// Log is a logger into t's output, at warn and above: what a queue or a
// relay warns about (a retried forward, a failed commit) is printed with
// a failing test, where it explains the failure. It falls silent once t
// and its cleanups are done, as a goroutine may outlive them.
func Log(t testing.TB) *slog.Logger {
	w := &testOutput{w: t.Output()}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testOutput struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (o *testOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return len(p), nil
	}
	return o.w.Write(p)
}

func (o *testOutput) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
}
