package server

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

// TestASaleContinuesAfterAFailover: the server finds its Redis through
// Sentinel (go-redis's failover URL); the primary is SIGKILLed mid-sale and
// the sentinels promote the replica. The server follows the new primary,
// and, since it is another incarnation (its own run_id), verifies each
// voucher against MySQL and the queue before using it: the earlier buyers
// stay refused and the rest of the sale sells exactly the stock.
func TestASaleContinuesAfterAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover skipped in -short mode")
	}
	for _, queue := range recoveryBackends {
		t.Run(queue, func(t *testing.T) {
			dsn, ok := testenv.MySQLDatabase(t)
			if !ok {
				t.Skipf("%s is not set", testenv.MySQLDSNEnv)
			}
			set := redistopology.StartSentinelSet(t)
			cfg := testConfig()
			cfg.RedisURL, cfg.MySQLDSN, cfg.Queue = set.URL(), dsn, queue
			h := startWith(t, cfg)
			if _, isClient := h.srv.rdb.(*redis.Client); !isClient || h.srv.clustered {
				t.Fatalf("the failover URL opened %T", h.srv.rdb)
			}
			const stock, sold = 30, 10
			voucher := h.openVoucher(stock)
			buyers(t, h, voucher, 1, sold)
			before := set.Primary()
			after := set.KillPrimary()
			t.Logf("primary on port %d killed; the sentinels promoted port %d", before, after)
			saleAfterLoss(t, h, voucher, stock, sold)
			if !strings.Contains(h.metricsText(), `seckill_rebuilds_total{queue="`+queue+`",result="ok"}`) {
				t.Fatal("no rebuild after the failover")
			}
		})
	}
}

// TestReplicaConfirmedAnswers: with SECKILL_REDIS_WAIT_REPLICAS=1, orders
// are accepted while the replica keeps up; with the replication stream held
// back (a proxy between primary and replica stops passing it on) a
// reservation is answered 503 unconfirmed, with its order id, and its order
// endpoint tells the outcome. Without the mode the same reservation is
// answered ok. Then the primary dies and the sentinels promote the replica,
// which never had that order: in the default mode an order answered ok is
// gone; in the WAIT mode the one that is gone had been answered unconfirmed.
// Batched reservations (SECKILL_REDIS_BATCH) answer the same: one WAIT per
// batch, on the batch's connection.
func TestReplicaConfirmedAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("failover skipped in -short mode")
	}
	for _, mode := range []struct {
		name  string
		wait  bool
		batch int
	}{{"WAIT mode", true, 0}, {"WAIT mode, batched", true, 8}, {"default", false, 0}} {
		wait := mode.wait
		t.Run(mode.name, func(t *testing.T) {
			dsn, ok := testenv.MySQLDatabase(t)
			if !ok {
				t.Skipf("%s is not set", testenv.MySQLDSNEnv)
			}
			set := redistopology.StartSentinelSetBehindProxy(t)
			cfg := testConfig()
			// No consumer: the orders stay in Redis, where a failover can lose them.
			cfg.RedisURL, cfg.MySQLDSN, cfg.Queue, cfg.Consumers = set.URL(), dsn, "streamgroup", 0
			if wait {
				cfg.WaitReplicas, cfg.WaitTimeout = 1, 200*time.Millisecond
			}
			cfg.RedisBatch = mode.batch // one WAIT per batch, on its connection
			h := startWith(t, cfg)
			voucher := h.openVoucher(10)
			path := "/api/vouchers/" + idString(voucher)
			for u := int64(1); u <= 3; u++ {
				if status, body := h.do("POST", path+"/seckill", h.shopper(u), nil); status != 200 {
					t.Fatalf("shopper %d with the replica in sync: %d %v", u, status, body)
				}
			}
			// Replicated (asynchronous replication has no deadline of its
			// own: the test waits), then held back.
			set.WaitReplicated()
			set.FreezeReplication()
			status, body := h.do("POST", path+"/seckill", h.shopper(4), nil)
			if wait {
				e, _ := body["error"].(map[string]any)
				if status != 503 || errorCode(body) != "unconfirmed" || e["orderId"] == nil {
					t.Fatalf("with replication held back: %d %v, want 503 unconfirmed with the order id", status, body)
				}
				if status, body := h.do("GET", path+"/order", h.shopper(4), nil); status != 200 || body["orderId"] != e["orderId"] {
					t.Fatalf("the unconfirmed order's status before the failover: %d %v, want its order", status, body)
				}
			} else if status != 200 {
				t.Fatalf("default mode with replication held back: %d %v, want 200", status, body)
			}
			set.KillPrimary()
			waitReady(t, h)
			if status, body := h.do("GET", path+"/order", h.shopper(4), nil); status != 404 || errorCode(body) != "order_not_found" {
				t.Fatalf("after the failover, shopper 4's order: %d %v; the replica never had it, want 404 order_not_found", status, body)
			}
			for u := int64(1); u <= 3; u++ {
				if status, body := h.do("GET", path+"/order", h.shopper(u), nil); status != 200 {
					t.Fatalf("shopper %d's replicated order after the failover: %d %v", u, status, body)
				}
			}
			if wait {
				t.Log("the order the failover lost had been answered 503 unconfirmed")
			} else {
				t.Log("the order the failover lost had been answered 200 ok")
			}
		})
	}
}
