package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/core"
)

// The Redis-loss cases: while the server keeps running, Redis forgets the
// sale. For each, the voucher, its stock and the order statuses come back
// right from the database and the queue, earlier buyers are told
// already_purchased, and the rest of the sale sells exactly the stock.

// recoveryBackends are those whose queue can tell what it holds.
var recoveryBackends = []string{"streamgroup", "stream", "list"}

// saleAfterLoss checks a voucher of `stock` whose users 1..sold bought
// before Redis forgot: the voucher and the earlier orders answer right,
// every earlier buyer is refused, and of users sold+1.. exactly the rest
// are accepted and persisted, with ids no other order has.
func saleAfterLoss(t *testing.T, h *harness, voucher, stock, sold int64) {
	t.Helper()
	waitReady(t, h)
	status, body := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil)
	if status != 200 || body["stock"] != float64(stock-sold) {
		t.Fatalf("voucher after the loss: %d %v, want 200 with stock %d", status, body, stock-sold)
	}
	status, body = h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", h.shopper(1), nil)
	if status != 200 || body["status"] != "created" {
		t.Fatalf("an earlier buyer's order after the loss: %d %v, want 200 created", status, body)
	}
	for u := int64(1); u <= sold; u++ {
		status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
		if status != 409 || errorCode(body) != "already_purchased" {
			t.Fatalf("earlier buyer %d after the loss: %d %v, want 409 already_purchased", u, status, body)
		}
	}
	var mu sync.Mutex
	accepted := map[string]bool{}
	var wg sync.WaitGroup
	for u := sold + 1; u <= sold+3*stock; u++ {
		wg.Go(func() {
			status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
			switch {
			case status == 200:
				mu.Lock()
				accepted[body["orderId"].(string)] = true
				mu.Unlock()
			case status != 409:
				t.Errorf("shopper %d after the loss: %d %v", u, status, body)
			}
		})
	}
	wg.Wait()
	if int64(len(accepted)) != stock-sold {
		t.Fatalf("%d accepted after the loss, want the %d left", len(accepted), stock-sold)
	}
	if n := h.waitForRows(voucher, int(stock), 20*time.Second); int64(n) != stock {
		t.Fatalf("%d rows, want %d: an accepted order was not persisted (a reused id is refused by the store)", n, stock)
	}
	if _, left := h.rows(voucher); left != 0 {
		t.Fatalf("database stock %d after selling out, want 0", left)
	}
	rows := orderRows(t, h, []int64{voucher})
	for id := range accepted {
		if _, ok := rows[id]; !ok {
			t.Fatalf("accepted order %s is not in the database", id)
		}
	}
	if text := h.metricsText(); !strings.Contains(text, `seckill_rebuilds_total{queue="`+h.cfg.Queue+`",result="ok"}`) {
		t.Fatal("no rebuild counted in /metrics")
	}
}

// forgetSale deletes every key of the server's sale under the running
// Redis: what an operator's FLUSHALL, or an eviction, does.
func forgetSale(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	keys, err := h.srv.rdb.Keys(ctx, h.cfg.KeyPrefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the sale's keys: %v %v", keys, err)
	}
	h.srv.rdb.Del(ctx, keys...)
}

func waitReady(t *testing.T, h *harness) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if status, _ := h.do("GET", "/readyz", "", nil); status == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready 10 s after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func buyers(t *testing.T, h *harness, voucher, from, to int64) {
	t.Helper()
	for u := from; u <= to; u++ {
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status != 200 {
			t.Fatalf("shopper %d: %d %v", u, status, body)
		}
	}
	if n := h.waitForRows(voucher, int(to), 10*time.Second); int64(n) != to {
		t.Fatalf("%d rows, want %d", n, to)
	}
}

// TestForgottenKeysAreRebuilt: every key of the sale is deleted under the
// running server (what an operator's FLUSHALL, or an eviction, does), on the
// embedded and the real stack.
func TestForgottenKeysAreRebuilt(t *testing.T) {
	for _, queue := range recoveryBackends {
		t.Run(queue, func(t *testing.T) {
			forEachStack(t, func(c *Config) { c.Queue = queue }, func(t *testing.T, h *harness) {
				const stock, sold = 20, 5
				voucher := h.openVoucher(stock)
				buyers(t, h, voucher, 1, sold)
				forgetSale(t, h)
				saleAfterLoss(t, h, voucher, stock, sold)
			})
		})
	}
}

// TestAnOrderReadFirstAfterRedisForgotIsFound: the first request after
// Redis forgot the sale is an order-status read. The voucher was verified
// in this incarnation, so nothing but the read itself can notice: a buyer
// it does not find must not be answered order_not_found while MySQL holds
// the order (the HGET of a forgotten hash cannot tell "no order" from "no
// state"). Then the buyer's status, and the stock, are right again.
func TestAnOrderReadFirstAfterRedisForgotIsFound(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		const stock, sold = 10, 3
		voucher := h.openVoucher(stock)
		buyers(t, h, voucher, 1, sold)
		forgetSale(t, h)
		for u := int64(1); u <= sold; u++ {
			status, body := h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", h.shopper(u), nil)
			if status != 200 || body["status"] != "created" {
				t.Fatalf("buyer %d's order, read first after Redis forgot: %d %v, want 200 created", u, status, body)
			}
		}
		if status, body := h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", h.shopper(sold+1), nil); status != 404 || errorCode(body) != "order_not_found" {
			t.Fatalf("a shopper who bought nothing: %d %v, want 404 order_not_found", status, body)
		}
		if status, body := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); status != 200 || body["stock"] != float64(stock-sold) {
			t.Fatalf("voucher after the reads: %d %v, want stock %d", status, body, stock-sold)
		}
	})
}

// TestRedisRestarted: a redis-server of the test's own is killed while
// the server runs, and comes back
//   - empty: what a restart without persistence does;
//   - from a snapshot taken after the first 3 of 10 orders: the stock of 7
//     orders ago, 3 buyers, the ID counter of then. Unnoticed, it would
//     sell to 7 earlier buyers again, and more than the stock.
func TestRedisRestarted(t *testing.T) {
	for _, restart := range []string{"empty", "from an old snapshot"} {
		for _, queue := range recoveryBackends {
			t.Run(restart+"/"+queue, func(t *testing.T) {
				h, redisProc := startOnOwnRedis(t, queue)
				const stock, sold = 20, 10
				voucher := h.openVoucher(stock)
				if restart == "empty" {
					buyers(t, h, voucher, 1, sold)
					redisProc.RestartEmpty()
				} else {
					buyers(t, h, voucher, 1, 3)
					redisProc.Snapshot()
					buyers(t, h, voucher, 4, sold)
					redisProc.RestartFromSnapshot()
				}
				saleAfterLoss(t, h, voucher, stock, sold)
			})
		}
	}
}

// startOnOwnRedis starts the server on a redis-server of the test's own and
// the real MySQL.
func startOnOwnRedis(t *testing.T, queue string) (*harness, *redistopology.RedisProcess) {
	t.Helper()
	if testing.Short() {
		t.Skip("Redis restarts skipped in -short mode")
	}
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	proc := redistopology.StartRedisProcess(t)
	cfg := testConfig()
	cfg.RedisURL, cfg.MySQLDSN, cfg.Queue = proc.URL(), dsn, queue
	return startWith(t, cfg), proc
}

// The rebuild's record: the window hash names the incarnation.
func TestALoadedVoucherRecordsTheIncarnation(t *testing.T) {
	h, _ := startOnOwnRedis(t, "streamgroup")
	voucher := h.openVoucher(3)
	keys := redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: h.srv.shards}
	epoch := h.srv.rdb.HGet(context.Background(), keys.Window(voucher), "epoch").Val()
	inc, err := h.srv.identity.Current(context.Background())
	if err != nil || epoch == "" || epoch != inc {
		t.Fatalf("window epoch %q, incarnation %q (%v): want the run_id recorded", epoch, inc, err)
	}
}

// TestAuditShowsWhatReconcileRepairs: an operator's view. A clean sale
// audits with no difference; with Redis's stock and a buyer tampered with,
// the audit names both, reconcile repairs them and says what it changed,
// and the tampered-away buyer is refused again.
func TestAuditShowsWhatReconcileRepairs(t *testing.T) {
	forEachStack(t, func(c *Config) { c.Queue = "streamgroup" }, func(t *testing.T, h *harness) {
		const stock = 10
		voucher := h.openVoucher(stock)
		buyers(t, h, voucher, 1, 3)
		path := "/api/admin/vouchers/" + idString(voucher)
		status, body := h.do("GET", path+"/audit", h.cfg.AdminToken, nil)
		if status != 200 || len(body["differences"].([]any)) != 0 || body["expectedStock"] != float64(stock-3) {
			t.Fatalf("audit of a clean sale: %d %v", status, body)
		}
		ctx := context.Background()
		keys := redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: h.srv.shards}
		h.srv.rdb.Set(ctx, keys.Stock(voucher), 99, 0)
		h.srv.rdb.HDel(ctx, keys.Orders(voucher), "1")
		status, body = h.do("GET", path+"/audit", h.cfg.AdminToken, nil)
		diffs := fmt.Sprint(body["differences"])
		if status != 200 || !strings.Contains(diffs, "stock: live 99, expected 7") || !strings.Contains(diffs, "1 in the database or the queue are unknown") {
			t.Fatalf("audit after tampering: %d %v", status, body)
		}
		status, body = h.do("POST", path+"/reconcile", h.cfg.AdminToken, nil)
		if status != 200 || body["changed"] != true || body["stockBefore"] != float64(99) || body["stockAfter"] != float64(7) ||
			body["buyersBefore"] != float64(2) || body["buyersAfter"] != float64(3) {
			t.Fatalf("reconcile: %d %v", status, body)
		}
		if status, body = h.do("GET", path+"/audit", h.cfg.AdminToken, nil); status != 200 || len(body["differences"].([]any)) != 0 {
			t.Fatalf("audit after reconcile: %d %v", status, body)
		}
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 409 || errorCode(body) != "already_purchased" {
			t.Fatalf("the buyer reconcile restored: %d %v, want 409 already_purchased", status, body)
		}
		if status, _ := h.do("GET", path+"/audit", h.shopper(1), nil); status != 401 {
			t.Fatalf("audit with a shopper's token: %d, want 401", status)
		}
		for _, p := range []string{"/api/admin/vouchers/999999/audit", "/api/admin/vouchers/999999/reconcile"} {
			method := map[bool]string{true: "GET", false: "POST"}[strings.HasSuffix(p, "audit")]
			if status, body := h.do(method, p, h.cfg.AdminToken, nil); status != 404 || errorCode(body) != "voucher_not_found" {
				t.Fatalf("%s %s: %d %v, want 404 voucher_not_found", method, p, status, body)
			}
		}
	})
}

// TestRedisRestartedEmptyWithOrdersInFlight: five orders are accepted
// while the database is slow (their stock row locked); the consumers have
// read the first of them and wait on the lock when Redis restarts empty.
// The orders still queued in Redis are gone with it (accepted, never to be
// persisted: what a Redis without persistence costs, docs/iterations.md).
// The ones in flight are in neither the new Redis nor MySQL, so the rebuild
// cannot see them; once they commit, the consumer tells Redis of them
// (buyers marked, stock taken, once), so their stock is not sold again and
// their buyers are refused.
func TestRedisRestartedEmptyWithOrdersInFlight(t *testing.T) {
	for _, queue := range recoveryBackends {
		t.Run(queue, func(t *testing.T) {
			h, redisProc := startOnOwnRedis(t, queue)
			const stock, accepted = 20, 5
			voucher := h.openVoucher(stock)
			ctx := context.Background()
			lock := h.buyWithStockRowLocked(t, voucher, accepted)
			defer lock.Rollback()
			waitFor(t, 10*time.Second, "the consumer to wait on the locked stock row", func() bool {
				var waiting int
				h.srv.store.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
					"WHERE DB = DATABASE() AND INFO LIKE 'UPDATE `tb_seckill_voucher`%'").Scan(&waiting)
				return waiting > 0
			})
			redisProc.RestartEmpty()
			waitReady(t, h)
			// Rebuilt without the orders in flight: they are nowhere to see.
			if status, body := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); status != 200 || body["stock"] != float64(stock) {
				t.Fatalf("voucher right after the loss: %d %v, want the database's stock %d", status, body, stock)
			}
			lock.Rollback()
			// The consumers commit what they held, then nothing more comes.
			var inFlight int
			waitFor(t, 10*time.Second, "the orders in flight to commit", func() bool {
				n, _ := h.rows(voucher)
				if n == 0 || n != inFlight {
					inFlight = n
					time.Sleep(300 * time.Millisecond)
					return false
				}
				return true
			})
			rows := orderRows(t, h, []int64{voucher})
			for _, r := range rows {
				if r.user > int64(inFlight) {
					t.Fatalf("persisted users %v: want the first %d, read in order", rows, inFlight)
				}
			}
			waitFor(t, 10*time.Second, "Redis to be told of the orders in flight", func() bool {
				_, body := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil)
				return body["stock"] == float64(stock-inFlight)
			})
			t.Logf("%d of %d accepted orders were in flight and persisted; %d were queued in Redis and lost with it", inFlight, accepted, accepted-inFlight)
			saleAfterLoss(t, h, voucher, stock, int64(inFlight))
		})
	}
}

func waitFor(t testing.TB, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReconcileNeverSellsAnOrderInAConsumersHands: on the backends that
// cannot list the orders they hold (memory, pubsub), five orders are
// accepted while the consumer's first save is held. An operator's
// reconcile then cannot tell them from lost orders: it is refused (409
// not_reconcilable), and a rebuild the request path starts (the stock key
// gone) keeps their buyers. No buyer is sold a second unit; once the
// orders are persisted the reconcile runs and the audit is clean.
func TestReconcileNeverSellsAnOrderInAConsumersHands(t *testing.T) {
	for _, queue := range []string{"memory", "pubsub"} {
		for _, stack := range []string{"embedded", "real"} {
			t.Run(queue+"/"+stack, func(t *testing.T) {
				gate := newStoreGate()
				h := startServerWith(t, stack, func(c *Config) { c.Queue = queue; c.Consumers = 1 },
					func(s *Server) { s.consumers = gate.wrapConsumers(s) })
				defer gate.open()
				const stock, sold = 10, 5
				voucher := h.openVoucher(stock)
				path := "/api/vouchers/" + idString(voucher)
				for u := int64(1); u <= sold; u++ {
					if status, body := h.do("POST", path+"/seckill", h.shopper(u), nil); status != 200 {
						t.Fatalf("shopper %d: %d %v", u, status, body)
					}
				}
				gate.waitHeld(t)
				reconcile := "/api/admin/vouchers/" + idString(voucher) + "/reconcile"
				if status, body := h.do("POST", reconcile, h.cfg.AdminToken, nil); status != 409 || errorCode(body) != "not_reconcilable" {
					t.Fatalf("reconcile with %d orders in the consumer's hands: %d %v, want 409 not_reconcilable", sold, status, body)
				}
				// The request path's own rebuild (the stock key vanished).
				if err := h.srv.rdb.Del(context.Background(), redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: h.srv.shards}.Stock(voucher)).Err(); err != nil {
					t.Fatal(err)
				}
				for u := int64(1); u <= sold; u++ {
					if status, body := h.do("POST", path+"/seckill", h.shopper(u), nil); status != 409 || errorCode(body) != "already_purchased" {
						t.Fatalf("buyer %d again after a rebuild: %d %v, want 409 already_purchased", u, status, body)
					}
				}
				if status, body := h.do("GET", path, "", nil); status != 200 || body["stock"] != float64(stock-sold) {
					t.Fatalf("voucher after the rebuild: %d %v, want stock %d", status, body, stock-sold)
				}
				gate.open()
				if n := h.waitForRows(voucher, sold, 10*time.Second); n != sold {
					t.Fatalf("%d rows, want %d", n, sold)
				}
				if status, body := h.do("POST", reconcile, h.cfg.AdminToken, nil); status != 200 {
					t.Fatalf("reconcile once persisted: %d %v", status, body)
				}
				status, body := h.do("GET", "/api/admin/vouchers/"+idString(voucher)+"/audit", h.cfg.AdminToken, nil)
				if diffs, _ := body["differences"].([]any); status != 200 || len(diffs) != 0 {
					t.Fatalf("audit after the reconcile: %d %v, want no differences", status, body)
				}
			})
		}
	}
}

// TestAnEvictedBuyersHashNeverSellsItsBuyersAgain: what an eviction does
// under an unchanged run_id — one key of the sale gone, the buyers hash,
// the rest there. Each voucher keeps its total beside its window; the
// script and the check before use find buyers plus stock short of it and
// rebuild the voucher, so every earlier buyer is told already_purchased
// with their order, their order reads back, and the rest of the stock
// sells exactly.
func TestAnEvictedBuyersHashNeverSellsItsBuyersAgain(t *testing.T) {
	for _, queue := range recoveryBackends {
		t.Run(queue, func(t *testing.T) {
			forEachStack(t, func(c *Config) { c.Queue = queue }, func(t *testing.T, h *harness) {
				const stock, sold = 10, 4
				voucher := h.openVoucher(stock)
				buyers(t, h, voucher, 1, sold)
				keys := redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: h.srv.shards}
				if err := h.srv.rdb.Del(context.Background(), keys.Orders(voucher)).Err(); err != nil {
					t.Fatal(err)
				}
				status, body := h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", h.shopper(2), nil)
				if status != 200 || body["status"] != "created" {
					t.Fatalf("a buyer's order after the eviction: %d %v, want 200 created", status, body)
				}
				saleAfterLoss(t, h, voucher, stock, sold)
			})
		})
	}
}

// TestOrdersOfAVanishedStreamAreRequeuedNotLost: the stream of a voucher's
// shard vanishes under an unchanged Redis (deleted, or evicted) with two
// orders nobody persisted yet. The consumer that meets the missing group
// says so, and Redis becomes another incarnation: every instance rebuilds
// the voucher before its next use. The buyers' hash still names the two
// orders, which neither the queue nor MySQL has: the rebuild hands them to
// the queue again before it overwrites the buyers, so both are persisted
// with the ids their shoppers were answered, their units stay sold, and
// their shoppers hold them. (The outside review's deleted backlog lost 158
// orders answered 200, their units sold again.)
func TestOrdersOfAVanishedStreamAreRequeuedNotLost(t *testing.T) {
	forEachStack(t, func(c *Config) { c.Queue = "streamgroup"; c.Consumers = 0 }, func(t *testing.T, h *harness) {
		ctx := context.Background()
		const stock = 5
		voucher := h.openVoucher(stock)
		answered := map[string]bool{}
		for u := int64(1); u <= 2; u++ {
			status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
			if status != 200 {
				t.Fatalf("shopper %d: %d %v", u, status, body)
			}
			answered[body["orderId"].(string)] = true
		}
		var other *harness
		if h.cfg.RedisURL != "" {
			other = startWith(t, h.cfg)
			if status, body := other.do("GET", "/api/vouchers/"+idString(voucher), "", nil); status != 200 || body["stock"] != float64(stock-2) {
				t.Fatalf("the other instance before the loss: %d %v, want stock %d", status, body, stock-2)
			}
		}
		queue := h.queueKey("orders", voucher)
		if err := h.srv.rdb.Del(ctx, queue).Err(); err != nil {
			t.Fatal(err)
		}
		// The audit sees the two orders only the buyers' hash still names.
		status, audit := h.do("GET", "/api/admin/vouchers/"+idString(voucher)+"/audit", h.cfg.AdminToken, nil)
		if status != 200 || !strings.Contains(fmt.Sprint(audit["differences"]), "2 known to the live store are in neither the database nor the queue") {
			t.Fatalf("the audit after the stream vanished: %d %v, want the 2 stranded orders named", status, audit)
		}
		// What the pipeline's consumer does next: its read meets NOGROUP.
		c, err := h.srv.queue.Consumer(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c.Fetch(fctx, 10)
		cancel()
		c.Close()
		for _, inst := range []*harness{other, h} {
			if inst == nil {
				continue
			}
			if status, body := inst.do("GET", "/api/vouchers/"+idString(voucher), "", nil); status != 200 || body["stock"] != float64(stock-2) {
				t.Fatalf("stock after the stream vanished: %d %v, want %d (the two orders' units still sold)", status, body, stock-2)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for n, _ := h.srv.rdb.XLen(ctx, queue).Result(); n != 2; n, _ = h.srv.rdb.XLen(ctx, queue).Result() {
			if time.Now().After(deadline) {
				t.Fatalf("the vanished queue holds %d orders after the rebuilds, want the 2 requeued once", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		drain(t, h)
		rows := orderRows(t, h, []int64{voucher})
		for id := range answered {
			if _, ok := rows[id]; !ok {
				t.Errorf("order %s, answered 200, is not in MySQL (rows %v)", id, rows)
			}
		}
		if len(rows) != 2 {
			t.Fatalf("%d rows, want the 2 answered", len(rows))
		}
		if n, left := h.rows(voucher); n != 2 || left != stock-2 {
			t.Fatalf("%d rows, database stock %d; want 2 and %d", n, left, stock-2)
		}
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 409 || errorCode(body) != "already_purchased" {
			t.Fatalf("a shopper whose order was requeued buys again: %d %v, want 409 already_purchased", status, body)
		}
	})
}

// TestARefusedSecondOrdersUnitComesBackOnce: the buyers' hash is lost (an
// eviction, an operator's mistake) and a shopper who holds an order buys
// again: the reservation answers 200, and the store refuses the order
// (buyer_holds_another). The outside review saw the shopper's status read
// queued for ever and the unit never come back (stock column 10, Redis
// 9). Now the dead letter gives the unit back, once (its text says so),
// the buyer's mark names the order they hold, whose status their order
// endpoint shows, and a third buy is already_purchased. The operator's
// discard of the letter cancels the refused order and returns nothing
// more. On every backend that has a queue.
func TestARefusedSecondOrdersUnitComesBackOnce(t *testing.T) {
	forEachBackendAndStack(t, func(t *testing.T, h *harness) {
		if h.cfg.Queue == "sync" {
			t.Skip("sync has no queue: the second order is refused by the transaction, nothing is dead-lettered")
		}
		ctx := context.Background()
		const stock = 10
		voucher := h.openVoucher(stock)
		buy := func() (int, map[string]any) {
			return h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(7), nil)
		}
		status, body := buy()
		if status != 200 {
			t.Fatalf("first buy: %d %v", status, body)
		}
		first := body["orderId"].(string)
		h.waitForRows(voucher, 1, 10*time.Second)
		keys := redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: h.srv.shards}
		if err := h.srv.rdb.Del(ctx, keys.Orders(voucher)).Err(); err != nil {
			t.Fatal(err)
		}
		h.srv.memo.Clear() // this instance's memory of the buyer, as after a restart
		status, body = buy()
		if e, _ := body["error"].(map[string]any); status == 409 && e["orderId"] == first {
			// Where Redis may evict (the stand-in is taken as such), the
			// script checks a voucher whole: it saw the buyers' loss, and
			// the rebuild from MySQL restored the buyer. Nothing is refused.
			if live, _ := h.srv.rdb.Get(ctx, keys.Stock(voucher)).Int64(); live != stock-1 {
				t.Fatalf("Redis stock %d after the loss was rebuilt, want %d", live, stock-1)
			}
			return
		}
		if status != 200 {
			t.Fatalf("the second buy once the buyers' hash is gone: %d %v (the reservation cannot tell)", status, body)
		}
		second := body["orderId"].(string)
		dead := h.srv.metrics.deadLetters.WithLabelValues(string(core.DeadLetterBuyerHoldsAnother))
		for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(dead) < 1 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if n := testutil.ToFloat64(dead); n != 1 {
			t.Fatalf("buyer_holds_another dead letters: %v, want the second order's 1", n)
		}
		deadline := time.Now().Add(5 * time.Second)
		var live, left int64
		for {
			live, _ = h.srv.rdb.Get(ctx, keys.Stock(voucher)).Int64()
			_, left = h.rows(voucher)
			if live == left || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if live != stock-1 || left != stock-1 {
			t.Fatalf("stock: Redis %d, database %d; want both %d (the refused order's unit back)", live, left, stock-1)
		}
		if mark := h.srv.rdb.HGet(ctx, keys.Orders(voucher), "7").Val(); mark != first {
			t.Fatalf("the buyer's mark names %q, want the order they hold, %s (not the refused %s)", mark, first, second)
		}
		if status, body := h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", h.shopper(7), nil); status != 200 || body["orderId"] != first || body["status"] != "created" {
			t.Fatalf("the shopper's order: %d %v, want %s created (not the refused one, queued for ever)", status, body, first)
		}
		if status, body := buy(); status != 409 || errorCode(body) != "already_purchased" {
			t.Fatalf("a third buy: %d %v, want already_purchased", status, body)
		}
		// The dead letter says the unit went back; a second return gives nothing.
		dl, err := core.ReadDeadLetters(ctx, core.CapabilitiesOf(h.srv.queue).DeadLetters, 10)
		if err != nil || len(dl) != 1 || !strings.Contains(dl[0].Reason, "went back on sale, returned once") {
			t.Fatalf("the dead letter: %+v, %v; want it to say its unit went back", dl, err)
		}
		id, _ := strconv.ParseInt(second, 10, 64)
		if res, err := h.srv.board.(*redisreserve.Reserver).Live().ReturnRefused(ctx, core.Order{ID: id, UserID: 7, VoucherID: voucher}, 0); err != nil || res != core.NothingToReturn {
			t.Fatalf("returning the refused order's unit again: %v %v, want nothing to return", res, err)
		}
		if live, _ := h.srv.rdb.Get(ctx, keys.Stock(voucher)).Int64(); live != stock-1 {
			t.Fatalf("Redis stock %d after a second return, want %d", live, stock-1)
		}
		// The operator discards the letter: the refused order is cancelled,
		// the held one stays, and its unit, back already, is not returned
		// again.
		waitForLetters(t, h, "reason=buyer_holds_another&voucher="+idString(voucher), 1)
		if status, out := h.do("POST", "/api/admin/deadletters/discard", h.cfg.AdminToken,
			map[string]any{"voucher": idString(voucher)}); status != 200 || out["discarded"] != float64(1) {
			t.Fatalf("discard: %d %v", status, out)
		}
		if o, err := h.srv.store.FindOrder(ctx, id); err != nil || o.Status != core.StatusCancelled || o.CancelReason != core.CancelDiscarded {
			t.Fatalf("the refused order after the discard: %+v %v, want cancelled, discarded", o, err)
		}
		if live, _ := h.srv.rdb.Get(ctx, keys.Stock(voucher)).Int64(); live != stock-1 {
			t.Fatalf("Redis stock %d after the discard, want %d: the unit came back twice", live, stock-1)
		}
		if status, body := h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", h.shopper(7), nil); status != 200 || body["orderId"] != first || body["status"] != "created" {
			t.Fatalf("the shopper's order after the discard: %d %v, want %s created", status, body, first)
		}
	})
}
