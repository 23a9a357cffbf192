package server

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/core"
)

// TestAHotVoucherInBucketsOnTheCluster: a voucher created with 3 buckets
// on the cluster (12 shards, so a bucket on each master) sells every unit
// exactly once to shoppers racing over HTTP, its orders reach MySQL from
// three shards' streams, the audit finds nothing wrong, a reconcile
// rebuilds every bucket as it was, and a cancelled order's unit is sold
// again to a shopper of another bucket.
func TestAHotVoucherInBucketsOnTheCluster(t *testing.T) {
	cfg, _ := clusterConfig(t, "streamgroup")
	h := startWith(t, cfg)
	const stock, shoppers = 45, 180
	status, body := h.do("POST", "/api/admin/vouchers", h.cfg.AdminToken, map[string]any{
		"title": "hot", "payValue": 100, "actualValue": 200, "stock": stock, "buckets": 3,
		"beginTime": time.Now().Add(-time.Minute).Format(time.RFC3339Nano), "endTime": time.Now().Add(time.Hour).Format(time.RFC3339Nano),
	})
	if status != http.StatusCreated || body["buckets"] != float64(3) {
		t.Fatalf("create: %d %v", status, body)
	}
	voucher := int64(body["id"].(float64))
	path := "/api/vouchers/" + idString(voucher)
	var (
		mu     sync.Mutex
		orders = map[int64]string{}
		wg     sync.WaitGroup
	)
	for u := int64(1); u <= shoppers; u++ {
		wg.Go(func() {
			status, body := h.do("POST", path+"/seckill", h.shopper(u), nil)
			switch {
			case status == 200:
				mu.Lock()
				orders[u] = body["orderId"].(string)
				mu.Unlock()
			case status != 409 || errorCode(body) != "sold_out":
				t.Errorf("shopper %d: %d %v", u, status, body)
			}
		})
	}
	wg.Wait()
	if len(orders) != stock {
		t.Fatalf("%d accepted of stock %d", len(orders), stock)
	}
	if n := h.waitForRows(voucher, stock, 20*time.Second); n != stock {
		t.Fatalf("%d of %d orders persisted", n, stock)
	}
	if rows, left := h.rows(voucher); rows != stock || left != 0 {
		t.Fatalf("%d rows, database stock %d", rows, left)
	}
	if status, body := h.do("GET", "/api/admin/vouchers/"+idString(voucher)+"/audit", h.cfg.AdminToken, nil); status != 200 || len(body["differences"].([]any)) != 0 {
		t.Errorf("audit: %d %v", status, body)
	}
	if status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/reconcile", h.cfg.AdminToken, nil); status != 200 {
		t.Fatalf("reconcile: %d %v", status, body)
	}
	if status, body := h.do("GET", path, "", nil); status != 200 || body["stock"] != float64(0) {
		t.Errorf("after the reconcile: %d %v", status, body)
	}
	// A cancellation: the unit goes back to its buyer's bucket, and a
	// shopper routed to another bucket buys it by borrowing.
	var buyer int64
	for u := range orders {
		buyer = u
		break
	}
	if status, body := h.do("POST", "/api/orders/"+orders[buyer]+"/cancel", h.shopper(buyer), nil); status != 200 {
		t.Fatalf("cancel: %d %v", status, body)
	}
	latecomer := int64(shoppers + 1)
	for core.BucketOf(latecomer, 3) == core.BucketOf(buyer, 3) {
		latecomer++
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, body := h.do("POST", path+"/seckill", h.shopper(latecomer), nil)
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the returned unit was not sold to a shopper of another bucket: %d %v", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := h.waitForRows(voucher, stock+1, 20*time.Second); n != stock+1 {
		t.Fatalf("%d orders persisted, want %d", n, stock+1)
	}
	if _, left := h.rows(voucher); left != 0 {
		t.Errorf("database stock %d after the resale, want 0", left)
	}
}

// TestBucketsBeyondTheShardsAreRefused: on one Redis (one shard by
// default) a voucher in buckets is a bad request, saying why.
func TestBucketsBeyondTheShardsAreRefused(t *testing.T) {
	h := startServer(t, "embedded", nil)
	status, body := h.do("POST", "/api/admin/vouchers", h.cfg.AdminToken, map[string]any{
		"title": "hot", "payValue": 100, "actualValue": 200, "stock": 10, "buckets": 2,
		"beginTime": time.Now().Add(-time.Minute).Format(time.RFC3339Nano), "endTime": time.Now().Add(time.Hour).Format(time.RFC3339Nano),
	})
	if status != 400 || errorCode(body) != "bad_request" {
		t.Errorf("2 buckets on 1 shard: %d %v", status, body)
	}
}

// TestAMasterRestartedEmptyMidSaleOfAVoucherInBuckets: on a cluster of the
// test's own, a voucher in 3 buckets (one on each master) has sold part of
// its stock, every order persisted, when the master of one bucket restarts
// empty, its shard's stream gone with it. The sale goes on exact: the
// voucher shows the stock left, earlier buyers are refused, the stock left
// is sold once, and the database ends with one row per unit.
func TestAMasterRestartedEmptyMidSaleOfAVoucherInBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of the test's own: skipped in -short mode")
	}
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	cluster := redistopology.StartCluster(t)
	cfg := testConfig()
	cfg.RedisURL, cfg.MySQLDSN, cfg.Queue = cluster.URL(), dsn, "streamgroup"
	h := startWith(t, cfg)
	const stock, sold = 30, 12
	voucher := h.openVoucherIn(stock, 3)
	buyers(t, h, voucher, 1, sold)
	keys := redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: h.srv.shards}
	cluster.Nodes[cluster.Owner(t, keys.Bucket(voucher, 1, 3).Window)].RestartEmpty()
	cluster.WaitHealthy(t)
	saleAfterLoss(t, h, voucher, stock, sold)
}
