package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/lua"
)

// commandCounter counts the commands a client sends, pipelines included,
// by name. INFO is left out: the identity watcher sends it once a second
// whatever the requests do; so is a new connection's handshake (HELLO,
// CLIENT SETINFO, AUTH, SELECT), which the pool sends whenever a duty
// holds the connection a request would have used.
type commandCounter struct {
	mu    sync.Mutex
	names []string
	shas  []string // of each EVALSHA, in order
}

func (*commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.add(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *commandCounter) add(cmd redis.Cmder) {
	switch cmd.Name() {
	case "info", "hello", "client", "auth", "select":
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, cmd.Name())
	if args := cmd.Args(); cmd.Name() == "evalsha" && len(args) > 1 {
		c.shas = append(c.shas, fmt.Sprint(args[1]))
	}
}

// reservations counts the reservation scripts (one reservation each, or a
// batch) run since the last take, leaving out what the instance's duties
// send meanwhile.
func (c *commandCounter) reservations() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, sha := range c.shas {
		if sha == reservationScriptSHA || sha == batchScriptSHA {
			n++
		}
	}
	c.names, c.shas = nil, nil
	return n
}

var (
	reservationScriptSHA = redis.NewScript(lua.Seckill).Hash()
	batchScriptSHA       = redis.NewScript(lua.SeckillBatch).Hash()
)

// take returns the commands counted since the last take.
func (c *commandCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.names
	c.names, c.shas = nil, nil
	return out
}

// TestOneRoundTripPerSeckillAndNoneOnceSoldOut: on the default
// configuration — the per-shopper rate limit on, an API-only instance as
// the method runs it — each seckill while stock remains costs
// Redis one command (the reservation script, which keeps the limit too),
// and once the voucher is sold out the answers cost Redis nothing.
func TestOneRoundTripPerSeckillAndNoneOnceSoldOut(t *testing.T) {
	forEachStack(t, func(c *Config) {
		c.Consumers = 0
		c.SeckillRate = 5 // the default a user gets; testConfig turns it off
		c.AnswerMemo = time.Minute
	}, func(t *testing.T, h *harness) {
		counter := &commandCounter{}
		h.srv.rdb.AddHook(counter)
		const n = 100
		voucher := h.openVoucher(n + 1)
		path := "/api/vouchers/" + idString(voucher) + "/seckill"
		// The first takes the ID worker's block of ids and verifies the
		// voucher: the once-per-voucher costs, before counting.
		if status, body := h.do("POST", path, h.shopper(1), nil); status != 200 {
			t.Fatalf("first seckill: %d %v", status, body)
		}
		counter.take()
		for u := int64(2); u <= n+1; u++ {
			if status, body := h.do("POST", path, h.shopper(u), nil); status != 200 {
				t.Fatalf("shopper %d with stock left: %d %v", u, status, body)
			}
		}
		if got := counter.take(); len(got) != n || slices.ContainsFunc(got, func(s string) bool { return s != "evalsha" }) {
			t.Fatalf("%d seckills with stock left sent %d commands %v; want one evalsha each", n, len(got), summarize(got))
		}
		// Sold out now: the first to hear it asks Redis, the rest do not.
		if status, body := h.do("POST", path, h.shopper(1000), nil); status != 409 || errorCode(body) != "sold_out" {
			t.Fatalf("after the last unit: %d %v", status, body)
		}
		counter.take()
		for u := int64(1001); u <= 1200; u++ {
			if status, body := h.do("POST", path, h.shopper(u), nil); status != 409 || errorCode(body) != "sold_out" {
				t.Fatalf("shopper %d of a sold-out voucher: %d %v", u, status, body)
			}
		}
		if got := counter.take(); len(got) != 0 {
			t.Fatalf("200 sold-out answers sent Redis %d commands %v; want none", len(got), summarize(got))
		}
		// 401 still comes first.
		if status, _ := h.do("POST", path, "", nil); status != 401 {
			t.Fatalf("without a token: %d, want 401 before the sold-out memo", status)
		}
	})
}

func summarize(names []string) map[string]int {
	out := map[string]int{}
	for _, n := range names {
		out[n]++
	}
	return out
}

// TestStockThatComesBackIsSoldAgainOnEveryInstance: two instances on one
// Redis both answer a sold-out voucher from memory, with a memo that would
// last a minute. An operator cancels the order in MySQL and reconciles on
// the first instance: the other sells the unit again within 250 ms,
// because the rebuild nudged it. No unit is sold twice.
func TestStockThatComesBackIsSoldAgainOnEveryInstance(t *testing.T) {
	forEachStack(t, func(c *Config) { c.AnswerMemo = time.Minute }, func(t *testing.T, a *harness) {
		cfgB := a.cfg
		cfgB.Consumers = 0 // A persists; on the stand-ins B's database is its own
		if a.srv.mini != nil {
			cfgB.RedisURL = "redis://" + a.srv.mini.Addr()
		}
		b := startWith(t, cfgB)
		voucher := a.openVoucher(1)
		path := "/api/vouchers/" + idString(voucher) + "/seckill"
		if status, body := a.do("POST", path, a.shopper(1), nil); status != 200 {
			t.Fatalf("the only unit: %d %v", status, body)
		}
		b.seesOrder(voucher, a.shopper(1))
		a.waitForRows(voucher, 1, 10*time.Second)
		for _, h := range []*harness{a, b} {
			if status, body := h.do("POST", path, h.shopper(2), nil); status != 409 || errorCode(body) != "sold_out" {
				t.Fatalf("sold out: %d %v", status, body)
			}
			inc, _ := h.srv.recovery.Incarnation(context.Background())
			if _, ok := h.srv.memo.Answer(voucher, inc); !ok {
				t.Fatal("an instance does not answer the sold-out voucher from memory")
			}
		}

		// The operator cancels the order: its row goes, its unit is back.
		ctx := context.Background()
		db := a.srv.store.DB()
		if _, err := db.ExecContext(ctx, "DELETE FROM tb_voucher_order WHERE voucher_id = ?", voucher); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = stock + 1 WHERE voucher_id = ?", voucher); err != nil {
			t.Fatal(err)
		}
		if status, body := a.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/reconcile", a.cfg.AdminToken, nil); status != 200 {
			t.Fatalf("reconcile: %d %v", status, body)
		}
		reconciled := time.Now()
		var soldAfter time.Duration
		for u := int64(100); ; u++ {
			status, body := b.do("POST", path, b.shopper(u), nil)
			if status == 200 {
				soldAfter = time.Since(reconciled)
				break
			}
			if errorCode(body) != "sold_out" {
				t.Fatalf("instance B after the reconcile: %d %v", status, body)
			}
			if time.Since(reconciled) > 5*time.Second {
				t.Fatal("instance B still answers sold out 5 s after the stock came back")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if soldAfter > 250*time.Millisecond {
			t.Fatalf("instance B sold the returned unit %v after the reconcile; the bound is 250 ms", soldAfter)
		}
		t.Logf("instance B sold the returned unit %v after the reconcile", soldAfter.Round(time.Millisecond))
		for _, h := range []*harness{a, b} {
			if status, body := h.do("POST", path, h.shopper(999), nil); status != 409 || errorCode(body) != "sold_out" {
				t.Fatalf("after the returned unit sold: %d %v, want sold out", status, body)
			}
		}
	})
}

// TestNotStartedFromMemoryButNeverPastTheOpening: before a sale opens, the
// answer comes from memory (a memo of a minute here), yet the first
// shopper after the opening is sold to at once: the memo stops a second
// before it.
func TestNotStartedFromMemoryButNeverPastTheOpening(t *testing.T) {
	forEachStack(t, func(c *Config) { c.Consumers, c.AnswerMemo = 0, time.Minute }, func(t *testing.T, h *harness) {
		begin := time.Now().Add(2500 * time.Millisecond)
		voucher := h.createVoucher(10, begin, begin.Add(time.Hour))
		path := "/api/vouchers/" + idString(voucher) + "/seckill"
		counter := &commandCounter{}
		h.srv.rdb.AddHook(counter)
		for u := int64(1); ; u++ {
			status, body := h.do("POST", path, h.shopper(u), nil)
			now := time.Now()
			if status == 200 {
				if late := now.Sub(begin); late > 150*time.Millisecond {
					t.Fatalf("the first sale came %v after the opening", late)
				}
				break
			}
			if status != 403 || errorCode(body) != "not_started" {
				t.Fatalf("before the opening: %d %v", status, body)
			}
			if now.After(begin.Add(150 * time.Millisecond)) {
				t.Fatalf("still not_started %v after the opening", now.Sub(begin))
			}
			time.Sleep(10 * time.Millisecond)
		}
		got := counter.take()
		// Polled every 10 ms for 2.5 s: from memory but for the first
		// answer and the last second before the opening (about 100).
		if evals := summarize(got)["evalsha"]; evals > 150 {
			t.Fatalf("%d reservations sent to Redis before the opening; the memo should have answered most", evals)
		}
	})
}

// TestReadyRefusalsMatchTheErrorHandler: the seckill's pre-encoded refusals
// are byte for byte what the error handler writes for the same errors.
func TestReadyRefusalsMatchTheErrorHandler(t *testing.T) {
	a := &api{log: slog.New(slog.DiscardHandler)}
	app := fiber.New(fiber.Config{ErrorHandler: a.handleError})
	for err, r := range refusals {
		app.Get("/"+string(r.code), func(*fiber.Ctx) error { return err })
		resp, terr := app.Test(httptest.NewRequest("GET", "/"+string(r.code), nil))
		if terr != nil {
			t.Fatal(terr)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != r.status || string(body) != string(r.body) {
			t.Errorf("%s: the handler writes %d %s, the ready answer is %d %s", r.code, resp.StatusCode, body, r.status, r.body)
		}
	}
	if len(refusals) != 4 {
		t.Fatalf("%d ready refusals, want sold out, not started, ended, already purchased", len(refusals))
	}
}

// TestABuyerIsAnsweredFromMemoryUntilTheirOrderIsCancelled: two instances
// on one Redis, a memo that would last a minute. A shopper who bought is
// answered 409 with the order id from memory on both — no Redis command —
// and, once they cancel on the first, may buy again on the second within
// 250 ms: the release nudged it to forget.
func TestABuyerIsAnsweredFromMemoryUntilTheirOrderIsCancelled(t *testing.T) {
	forEachStack(t, func(c *Config) { c.AnswerMemo = time.Minute }, func(t *testing.T, a *harness) {
		cfgB := a.cfg
		cfgB.Consumers = 0
		if a.srv.mini != nil {
			cfgB.RedisURL = "redis://" + a.srv.mini.Addr()
		}
		b := startWith(t, cfgB)
		voucher := a.openVoucher(5)
		path := "/api/vouchers/" + idString(voucher) + "/seckill"
		shopper := a.shopper(1)
		status, body := a.do("POST", path, shopper, nil)
		if status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
		order := body["orderId"].(string)
		b.seesOrder(voucher, shopper)
		// Each instance learns it once — from the reservation, or from
		// Redis's 409 (A's first reservation of a new voucher verified it,
		// which forgets the voucher, so its answer is not kept) — then
		// answers from memory.
		for _, h := range []*harness{a, b} {
			if status, body := h.do("POST", path, shopper, nil); status != 409 || errorCode(body) != "already_purchased" {
				t.Fatalf("a buyer: %d %v", status, body)
			}
		}
		for _, h := range []*harness{a, b} {
			counter := &commandCounter{}
			h.srv.rdb.AddHook(counter)
			for range 3 {
				status, body := h.do("POST", path, shopper, nil)
				held, _ := body["error"].(map[string]any)["orderId"].(string)
				if status != 409 || errorCode(body) != "already_purchased" || held != order {
					t.Fatalf("a buyer again: %d %v, want 409 already_purchased with order %s", status, body, order)
				}
			}
			if n := counter.reservations(); n != 0 {
				t.Fatalf("a buyer's repeats ran %d reservation scripts; want none", n)
			}
		}
		a.waitForRows(voucher, 1, 10*time.Second)
		if status, body := a.do("POST", "/api/orders/"+order+"/cancel", shopper, nil); status != 200 {
			t.Fatalf("cancel: %d %v", status, body)
		}
		cancelled := time.Now()
		for {
			status, body := b.do("POST", path, shopper, nil)
			if status == 200 {
				break
			}
			if errorCode(body) != "already_purchased" || time.Since(cancelled) > 5*time.Second {
				t.Fatalf("B after the cancellation: %d %v", status, body)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if took := time.Since(cancelled); took > 250*time.Millisecond {
			t.Fatalf("B let the shopper buy again %v after the cancellation; the bound is 250 ms", took)
		}
	})
}
