package server

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

// clusterConfig is the test configuration on the test Redis Cluster and the
// real MySQL; ok is false (the test skips) outside CI when either is not
// configured.
func clusterConfig(t *testing.T, queue string) (Config, testenv.Cluster) {
	t.Helper()
	c, ok := testenv.RealCluster(t)
	if !ok {
		t.Skipf("%s is not set: no Redis Cluster to test on (CI starts one)", testenv.ClusterURLEnv)
	}
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	cfg := testConfig()
	cfg.RedisURL, cfg.MySQLDSN, cfg.KeyPrefix, cfg.Queue = c.URL, dsn, c.Prefix, queue
	return cfg, c
}

// TestASaleOnRedisCluster: given go-redis's cluster URL, or one node's
// plain URL, the server runs on the cluster (login, ID worker, rate
// limits, reservation) and a contended sale ends exact: every accepted
// order persisted, none twice, the stock taken once per row.
func TestASaleOnRedisCluster(t *testing.T) {
	for _, queue := range []string{"memory", "sync"} {
		for _, form := range []string{"cluster URL", "one node's URL"} {
			t.Run(queue+"/"+form, func(t *testing.T) {
				cfg, c := clusterConfig(t, queue)
				if form == "one node's URL" {
					cfg.RedisURL = strings.Split(c.URL, "?")[0]
				}
				cfg.SeckillRate = 1000 // the limiter's script runs on the cluster too
				h := startWith(t, cfg)
				if _, isCluster := h.srv.rdb.(*redis.ClusterClient); !isCluster || !h.srv.clustered {
					t.Fatalf("the server opened %T, want a cluster client", h.srv.rdb)
				}
				// A login goes through the code keys on the cluster.
				status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": "13900000001"})
				if status != 200 {
					t.Fatalf("code: %d %v", status, body)
				}
				if status, body = h.do("POST", "/api/auth/login", "", map[string]any{"phone": "13900000001", "code": body["code"]}); status != 200 {
					t.Fatalf("login: %d %v", status, body)
				}

				const stock, shoppers = 40, 160
				voucher := h.openVoucher(stock)
				var accepted atomic.Int64
				var mu sync.Mutex
				ids := map[string]bool{}
				var wg sync.WaitGroup
				for u := int64(1); u <= shoppers; u++ {
					wg.Go(func() {
						status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
						if status == 200 {
							accepted.Add(1)
							mu.Lock()
							ids[body["orderId"].(string)] = true
							mu.Unlock()
						} else if status != 409 {
							t.Errorf("seckill: %d %v", status, body)
						}
					})
				}
				wg.Wait()
				if accepted.Load() != stock || len(ids) != stock {
					t.Fatalf("%d accepted (%d distinct ids) of stock %d", accepted.Load(), len(ids), stock)
				}
				if n := h.waitForRows(voucher, stock, 15*time.Second); n != stock {
					t.Fatalf("%d of %d accepted orders persisted", n, stock)
				}
				if rows, left := h.rows(voucher); rows != stock || left != 0 {
					t.Fatalf("%d rows, database stock %d; want %d and 0", rows, left, stock)
				}
			})
		}
	}
}

// TestABackendWhoseScriptSpansSlotsRefusesTheCluster: a backend whose queue
// key does not carry the voucher's hash tag could only fail every
// reservation with CROSSSLOT; the server refuses to start on a cluster,
// saying why. (Today that is every Redis-fed built-in backend: their one
// queue key is global. The Cluster issue shards them.)
func TestABackendWhoseScriptSpansSlotsRefusesTheCluster(t *testing.T) {
	cfg, _ := clusterConfig(t, "streamgroup")
	srv, err := New(context.Background(), cfg, nil)
	if err == nil {
		srv.Close()
		t.Fatal("streamgroup started on a cluster with one global stream")
	}
	if !strings.Contains(err.Error(), "cannot run on this Redis Cluster") || !strings.Contains(err.Error(), "hash tag") {
		t.Fatalf("err = %v, want the reason", err)
	}
}
