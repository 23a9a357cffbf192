package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/memqueue"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
)

func errorCode(body map[string]any) string { return errorField(body, "code") }

// errorField is a string field of an error answer's object.
func errorField(body map[string]any, name string) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e[name].(string)
	return c
}

// TestWalkthrough is the README's curl walk-through on every backend:
// code, login, create a voucher, seckill, see the order.
func TestWalkthrough(t *testing.T) {
	forEachBackendAndStack(t, func(t *testing.T, h *harness) {
		status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": "13800000000"})
		code, _ := body["code"].(string)
		challenge, _ := body["challenge"].(string)
		if status != 200 || body["sent"] != true || len(code) != 6 || challenge == "" {
			t.Fatalf("code: %d %v", status, body)
		}
		// A second code at once is another code: the first one stays valid.
		if status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": "13800000000"}); status != 200 || body["challenge"] == challenge {
			t.Fatalf("second code at once: %d %v, want 200 with a challenge of its own", status, body)
		}
		if status, body := h.do("POST", "/api/auth/login", "", map[string]any{"phone": "13800000000", "code": "000000x", "challenge": challenge}); status != 401 || errorCode(body) != "bad_code" {
			t.Fatalf("wrong code: %d %v, want 401 bad_code", status, body)
		}
		if status, body := h.do("POST", "/api/auth/login", "", map[string]any{"phone": "13800000000", "code": code}); status != 400 || errorCode(body) != "bad_request" {
			t.Fatalf("login without the challenge: %d %v, want 400 bad_request", status, body)
		}
		status, body = h.do("POST", "/api/auth/login", "", map[string]any{"phone": "13800000000", "code": code, "challenge": challenge})
		token, _ := body["token"].(string)
		if status != 200 || token == "" || body["userId"].(float64) <= 0 {
			t.Fatalf("login: %d %v", status, body)
		}
		if status, _ := h.do("POST", "/api/auth/login", "", map[string]any{"phone": "13800000000", "code": code, "challenge": challenge}); status != 401 {
			t.Fatalf("a code worked twice: %d", status)
		}

		voucher := h.openVoucher(10)
		status, body = h.do("GET", "/api/vouchers/"+idString(voucher), "", nil)
		if status != 200 || body["stock"].(float64) != 10 || body["title"] != "test voucher" {
			t.Fatalf("voucher: %d %v", status, body)
		}
		status, body = h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", token, nil)
		orderID, _ := body["orderId"].(string)
		if status != 200 || orderID == "" {
			t.Fatalf("seckill: %d %v", status, body)
		}
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", token, nil); status != 409 || errorCode(body) != "already_purchased" ||
			body["error"].(map[string]any)["orderId"] != orderID {
			t.Fatalf("second seckill: %d %v, want 409 already_purchased with the held order %s", status, body, orderID)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, body = h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", token, nil)
			if status != 200 || body["orderId"] != orderID {
				t.Fatalf("order of voucher: %d %v", status, body)
			}
			if body["status"] == "created" || time.Now().After(deadline) {
				break
			}
			if body["status"] != "queued" {
				t.Fatalf("status %v, want queued or created", body["status"])
			}
			time.Sleep(20 * time.Millisecond)
		}
		if body["status"] != "created" {
			t.Fatal("the order was never persisted")
		}
		status, body = h.do("GET", "/api/orders/"+orderID, token, nil)
		if status != 200 || body["orderId"] != orderID || body["voucherId"].(float64) != float64(voucher) || body["status"] != "created" {
			t.Fatalf("order: %d %v", status, body)
		}
		if _, err := time.Parse(time.RFC3339, body["createTime"].(string)); err != nil {
			t.Fatalf("createTime %v: %v", body["createTime"], err)
		}
		// Another shopper sees 404 for it, as if it did not exist.
		if status, body := h.do("GET", "/api/orders/"+orderID, h.shopper(999999), nil); status != 404 || errorCode(body) != "order_not_found" {
			t.Fatalf("another user's order: %d %v, want 404", status, body)
		}
		if status, body := h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", h.shopper(999999), nil); status != 404 || errorCode(body) != "order_not_found" {
			t.Fatalf("no order of voucher: %d %v, want 404", status, body)
		}
	})
}

func TestSaleWindowAndStockErrors(t *testing.T) {
	forEachBackendAndStack(t, func(t *testing.T, h *harness) {
		soon := h.createVoucher(5, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
		over := h.createVoucher(5, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
		one := h.openVoucher(1)
		for _, c := range []struct {
			voucher int64
			user    int64
			status  int
			code    string
		}{
			{soon, 1, 403, "not_started"},
			{over, 1, 403, "ended"},
			{one, 1, 200, ""},
			{one, 2, 409, "sold_out"},
			{424242, 1, 404, "voucher_not_found"},
		} {
			status, body := h.do("POST", "/api/vouchers/"+idString(c.voucher)+"/seckill", h.shopper(c.user), nil)
			if status != c.status || errorCode(body) != c.code {
				t.Errorf("voucher %d user %d: %d %v, want %d %q", c.voucher, c.user, status, body, c.status, c.code)
			}
		}
	})
}

func TestMalformedRequestsGetClear4xx(t *testing.T) {
	h := startServer(t, "embedded", nil)
	shopper := h.shopper(1)
	hs256 := func(secret string, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	exp := time.Now().Add(time.Hour).Unix()
	noneToken := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"1","exp":9999999999}`)) + "."
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "1", "exp": exp}).SignedString(h.cfg.JWTSecret)
	secret := string(h.cfg.JWTSecret)
	voucher := h.openVoucher(5)
	buy := "/api/vouchers/" + idString(voucher) + "/seckill"

	for _, c := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
	}{
		{"id not a number", "GET", "/api/vouchers/abc", "", nil, 400, "bad_request"},
		{"id zero", "GET", "/api/vouchers/0", "", nil, 400, "bad_request"},
		{"id negative", "GET", "/api/vouchers/-5", "", nil, 400, "bad_request"},
		{"id overflows int64", "GET", "/api/vouchers/99999999999999999999", "", nil, 400, "bad_request"},
		{"order id not a number", "GET", "/api/orders/1e5", shopper, nil, 400, "bad_request"},
		{"unknown order", "GET", "/api/orders/12345", shopper, nil, 404, "order_not_found"},
		{"no token", "POST", buy, "", nil, 401, "unauthorized"},
		{"garbage token", "POST", buy, "not.a.jwt", nil, 401, "unauthorized"},
		{"alg none", "POST", buy, noneToken, nil, 401, "unauthorized"},
		{"other alg", "POST", buy, hs512, nil, 401, "unauthorized"},
		{"wrong secret", "POST", buy, hs256("another-secret-0123456789", jwt.MapClaims{"sub": "1", "exp": exp}), nil, 401, "unauthorized"},
		{"expired", "POST", buy, hs256(secret, jwt.MapClaims{"sub": "1", "exp": time.Now().Add(-time.Hour).Unix()}), nil, 401, "unauthorized"},
		{"no exp", "POST", buy, hs256(secret, jwt.MapClaims{"sub": "1"}), nil, 401, "unauthorized"},
		{"no sub", "POST", buy, hs256(secret, jwt.MapClaims{"exp": exp}), nil, 401, "unauthorized"},
		{"sub not a user id", "POST", buy, hs256(secret, jwt.MapClaims{"sub": "bob", "exp": exp}), nil, 401, "unauthorized"},
		{"admin without token", "POST", "/api/admin/vouchers", "", map[string]any{}, 401, "unauthorized"},
		{"admin with a shopper token", "POST", "/api/admin/vouchers", shopper, map[string]any{}, 401, "unauthorized"},
		{"unknown field", "POST", "/api/auth/code", "", `{"phone":"13800000000","x":1}`, 400, "bad_request"},
		{"wrong type", "POST", "/api/auth/code", "", `{"phone":13800000000}`, 400, "bad_request"},
		{"trailing data", "POST", "/api/auth/code", "", `{"phone":"13800000000"} {}`, 400, "bad_request"},
		{"not json", "POST", "/api/auth/code", "", `phone=1`, 400, "bad_request"},
		{"empty body", "POST", "/api/auth/login", "", ``, 400, "bad_request"},
		{"bad phone", "POST", "/api/auth/code", "", `{"phone":"12ab"}`, 400, "bad_request"},
		{"voucher stock as a string", "POST", "/api/admin/vouchers", h.cfg.AdminToken, `{"title":"t","payValue":1,"actualValue":1,"stock":"10","beginTime":"2030-01-01T00:00:00Z","endTime":"2030-01-02T00:00:00Z"}`, 400, "bad_request"},
		{"voucher title as a number", "POST", "/api/admin/vouchers", h.cfg.AdminToken, `{"title":5,"payValue":1,"actualValue":1,"stock":1,"beginTime":"2030-01-01T00:00:00Z","endTime":"2030-01-02T00:00:00Z"}`, 400, "bad_request"},
		{"voucher bad time", "POST", "/api/admin/vouchers", h.cfg.AdminToken, `{"title":"t","payValue":1,"actualValue":1,"stock":1,"beginTime":"tomorrow","endTime":"2030-01-01T00:00:00Z"}`, 400, "bad_request"},
		{"voucher end before begin", "POST", "/api/admin/vouchers", h.cfg.AdminToken, `{"title":"t","payValue":1,"actualValue":1,"stock":1,"beginTime":"2030-01-02T00:00:00Z","endTime":"2030-01-01T00:00:00Z"}`, 400, "bad_request"},
		{"voucher no stock", "POST", "/api/admin/vouchers", h.cfg.AdminToken, `{"title":"t","payValue":1,"actualValue":1,"stock":0,"beginTime":"2030-01-01T00:00:00Z","endTime":"2030-01-02T00:00:00Z"}`, 400, "bad_request"},
		{"voucher ends in year 10000 UTC", "POST", "/api/admin/vouchers", h.cfg.AdminToken, `{"title":"t","payValue":1,"actualValue":1,"stock":1,"beginTime":"2030-01-01T00:00:00Z","endTime":"9999-12-31T23:30:00-01:00"}`, 400, "bad_request"},
		{"voucher pays more than it is worth", "POST", "/api/admin/vouchers", h.cfg.AdminToken, `{"title":"t","payValue":3,"actualValue":2,"stock":1,"beginTime":"2030-01-01T00:00:00Z","endTime":"2030-01-02T00:00:00Z"}`, 400, "bad_request"},
		{"voucher title with a bidi override", "POST", "/api/admin/vouchers", h.cfg.AdminToken, `{"title":"price \u202e0001","payValue":1,"actualValue":1,"stock":1,"beginTime":"2030-01-01T00:00:00Z","endTime":"2030-01-02T00:00:00Z"}`, 400, "bad_request"},
		{"voucher title with a NUL", "POST", "/api/admin/vouchers", h.cfg.AdminToken, `{"title":"a\u0000b","payValue":1,"actualValue":1,"stock":1,"beginTime":"2030-01-01T00:00:00Z","endTime":"2030-01-02T00:00:00Z"}`, 400, "bad_request"},
		{"body too large", "POST", "/api/auth/code", "", `{"phone":"` + strings.Repeat("1", 20000) + `"}`, 413, "body_too_large"},
		{"unknown route", "GET", "/api/nope", "", nil, 404, "not_found"},
		{"wrong method", "DELETE", "/api/vouchers/1", "", nil, 405, "method_not_allowed"},
	} {
		status, body := h.do(c.method, c.path, c.token, c.body)
		if status != c.status || errorCode(body) != c.code {
			t.Errorf("%s: %d %v, want %d %q", c.name, status, body, c.status, c.code)
		}
		// An unexpected success has no error object: report it and go on
		// with the other cases instead of panicking the whole binary.
		errObj, ok := body["error"].(map[string]any)
		if !ok {
			t.Errorf("%s: body %v has no error object", c.name, body)
			continue
		}
		msg, _ := errObj["message"].(string)
		if msg == "" {
			t.Errorf("%s: error body %v has no message", c.name, body)
		}
		// The client's terms: never a Go type, struct or package name.
		for _, leak := range []string{"Go ", "struct", "int64", "json:", "time.Time", "server.", "core."} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: message %q names %q", c.name, msg, leak)
			}
		}
	}
}

func TestOversizedHeadersAreRefusedWithoutCrashing(t *testing.T) {
	h := startServer(t, "embedded", nil)
	req, _ := http.NewRequest("GET", h.base+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 32<<10))
	resp, err := h.client.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Fatalf("oversized headers: status %d, want a 4xx", resp.StatusCode)
		}
	}
	if status, _ := h.do("GET", "/healthz", "", nil); status != 200 {
		t.Fatalf("server unhealthy after oversized headers: %d", status)
	}
}

func TestPanicIsRecoveredAnd500(t *testing.T) {
	// The route goes in before the server serves: Fiber builds its routing
	// tree when it starts, and a route added later races with that.
	h := startServerWith(t, "embedded", nil, func(s *Server) {
		s.http.Get("/test-panic", func(*fiber.Ctx) error { panic("boom") })
	})
	status, body := h.do("GET", "/test-panic", "", nil)
	if status != 500 || errorCode(body) != "internal" {
		t.Fatalf("panic: %d %v, want 500 internal", status, body)
	}
	if msg, _ := body["error"].(map[string]any)["message"].(string); strings.Contains(msg, "boom") {
		t.Fatal("the panic value reached the client")
	}
	if status, _ := h.do("GET", "/healthz", "", nil); status != 200 {
		t.Fatal("server down after a panic")
	}
}

func TestReadyzIs503WhenTheDatabaseIsDown(t *testing.T) {
	h := startServer(t, "embedded", nil)
	h.srv.store.Close()
	status, body := h.do("GET", "/readyz", "", nil)
	if status != 503 || errorCode(body) != "not_ready" {
		t.Fatalf("readyz with the database down: %d %v, want 503 not_ready", status, body)
	}
	if status, _ := h.do("GET", "/api/vouchers/1", "", nil); status != 503 {
		t.Fatalf("voucher with the database down: %d, want 503", status)
	}
}

func TestReadyzIs503WhenRedisIsDown(t *testing.T) {
	h := startServer(t, "embedded", nil)
	if status, _ := h.do("GET", "/readyz", "", nil); status != 200 {
		t.Fatalf("readyz = %d, want 200", status)
	}
	h.srv.mini.Close()
	status, body := h.do("GET", "/readyz", "", nil)
	if status != 503 || errorCode(body) != "not_ready" {
		t.Fatalf("readyz with Redis down: %d %v, want 503 not_ready", status, body)
	}
	// A seckill now is 503 unavailable, not a crash and not a 500.
	status, _ = h.do("POST", "/api/vouchers/1/seckill", h.shopper(1), nil)
	if status != 503 {
		t.Fatalf("seckill with Redis down: %d, want 503", status)
	}
}

// TestPoisonMessageReachesTheDeadLetterStream: a message no consumer can
// decode is moved to the dead-letter stream and the orders behind it are
// still persisted.
func TestPoisonMessageReachesTheDeadLetterStream(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		ctx := context.Background()
		voucher := h.openVoucher(5)
		stream := h.queueKey("orders", voucher)
		if err := h.srv.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream,
			Values: []any{streamgroup.BodyField, `{"id":"not a number"}`}}).Err(); err != nil {
			t.Fatal(err)
		}
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
		if n := h.waitForRows(voucher, 1, 10*time.Second); n != 1 {
			t.Fatalf("%d rows: the order behind the poison message was not persisted", n)
		}
		// The poison message and the order may be read by two consumers:
		// the row can be in before the other's dead-lettering is done.
		var dead []redis.XMessage
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var err error
			dead, err = h.srv.rdb.XRange(ctx, stream+":dead", "-", "+").Result()
			if err == nil && len(dead) == 1 {
				break
			}
			if len(dead) > 1 || time.Now().After(deadline) {
				t.Fatalf("dead-letter stream: %d entries (%v), want 1", len(dead), err)
			}
		}
		if r, _ := dead[0].Values["reason"].(string); !strings.HasPrefix(r, "poison") {
			t.Fatalf("reason %q, want poison", r)
		}
		// The row is committed before its entry is acked: give the ack the
		// moment it takes.
		var pending int64 = -1
		for deadline := time.Now().Add(5 * time.Second); pending != 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			p, err := h.srv.rdb.XPending(ctx, stream, "seckill-persisters").Result()
			if err != nil {
				t.Fatal(err)
			}
			pending = p.Count
		}
		if pending != 0 {
			t.Fatalf("%d entries pending after 5s: the queue did not move on", pending)
		}
	})
}

// TestFullMemoryQueueAnswersBusyAndGivesTheStockBack: the BlockingQueue
// iteration refuses when its channel is full, releases the reservation,
// and answers 503 busy with Retry-After.
func TestFullMemoryQueueAnswersBusyAndGivesTheStockBack(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) { c.Queue = "memory"; *c = c.MustWith(string(memoryCapacity), "1"); c.Consumers = 0 })
	voucher := h.openVoucher(10)
	path := "/api/vouchers/" + idString(voucher) + "/seckill"
	if status, body := h.do("POST", path, h.shopper(1), nil); status != 200 {
		t.Fatalf("first buy: %d %v", status, body)
	}
	req, _ := http.NewRequest("POST", h.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+h.shopper(2))
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("buy into a full queue: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if status, body := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); body["stock"].(float64) != 9 {
		t.Fatalf("voucher: %d %v, want stock 9: the refused reservation must be released", status, body)
	}
	if status, _ := h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", h.shopper(2), nil); status != 404 {
		t.Fatalf("the refused shopper holds an order: %d", status)
	}
}

// TestCleanStopDrainsTheMemoryQueue: on SIGTERM the in-process queue is
// persisted before exit, so nothing accepted is lost. The one consumer's
// first transaction is held open until the sale is over, so the channel
// certainly holds every other accepted order when the stop comes.
func TestCleanStopDrainsTheMemoryQueue(t *testing.T) {
	for _, stack := range []string{"embedded", "real"} {
		t.Run(stack, func(t *testing.T) {
			gate := newStoreGate()
			h := startServerWith(t, stack, func(c *Config) { c.Queue = "memory"; c.Consumers = 1; c.BatchSize = 1 },
				func(s *Server) { s.consumers = gate.wrapConsumers(s) })
			voucher := h.openVoucher(5000)
			var accepted atomic.Int64
			users := make(chan int64)
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					for u := range users {
						if status, _ := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status == 200 {
							accepted.Add(1)
						}
					}
				})
			}
			for u := int64(1); u <= 3000; u++ {
				users <- u
			}
			close(users)
			wg.Wait()
			gate.waitHeld(t)
			n := int(accepted.Load())
			// The consumer holds the first order in its open transaction;
			// every other accepted order is still in the channel.
			buffered := h.srv.queue.(*memqueue.Queue).Depth()
			if n == 0 || buffered != n-1 {
				t.Fatalf("%d accepted, %d buffered: want every accepted order but the held one in the channel", n, buffered)
			}
			gate.open()
			h.shutdown()
			if rows, stock := h.rows(voucher); rows != n || stock != int64(5000-n) {
				t.Fatalf("after a clean stop with %d orders buffered: %d rows, stock %d; want all %d accepted persisted",
					buffered, rows, stock, n)
			}
		})
	}
}

// TestRateLimitsHoldAcrossInstances: two servers share one Redis; a
// shopper's seckill requests and a client's login-code requests are
// limited across both.
func TestRateLimitsHoldAcrossInstances(t *testing.T) {
	// No memo: a buyer's repeats answered from memory skip the limit (the
	// contract allows it), and this is about the limit Redis keeps.
	limited := func(c *Config) { c.SeckillRate = 2; c.CodeRate = 3; c.AnswerMemo = 0 }
	a := startServer(t, "embedded", limited)
	cfgB := a.cfg
	cfgB.RedisURL = "redis://" + a.srv.mini.Addr() // the same Redis, its own database
	b := startWith(t, cfgB)

	// Another voucher, bought on A and known to B before the limit is
	// reached, so that the limit is still on when B is asked for it.
	other := a.openVoucher(100)
	if status, body := a.do("POST", "/api/vouchers/"+idString(other)+"/seckill", a.shopper(9), nil); status != 200 {
		t.Fatalf("a first buyer of another voucher: %d %v", status, body)
	}
	b.seesOrder(other, a.shopper(9))

	voucher := a.openVoucher(100)
	path := "/api/vouchers/" + idString(voucher) + "/seckill"
	shopper := a.shopper(7)
	statuses := []int{}
	for i, h := range []*harness{a, b, a, b, a} {
		status, _ := h.do("POST", path, shopper, nil)
		statuses = append(statuses, status)
		if i == 0 {
			b.seesOrder(voucher, shopper) // a read: not limited
		}
	}
	// The first buys (200; a reservation is not counted: it marks the
	// buyer instead), the next two already hold an order (409), then the
	// limit of 2 per second across both instances answers 429.
	if fmt.Sprint(statuses) != "[200 409 409 429 429]" {
		t.Fatalf("statuses %v, want [200 409 409 429 429]", statuses)
	}
	if status, body := b.do("POST", path, a.shopper(8), nil); status != 200 {
		t.Fatalf("another shopper was limited too: %d %v", status, body)
	}
	seckill, _ := http.NewRequest("POST", a.base+path, nil)
	seckill.Header.Set("Authorization", "Bearer "+shopper)
	if resp, err := a.client.Do(seckill); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("seckill over the limit: %d (Retry-After %q), want 429 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// The reservation script keeps the limit, under the voucher's hash
	// tag: per shopper and voucher.
	if status, body := b.do("POST", "/api/vouchers/"+idString(other)+"/seckill", shopper, nil); status != 200 {
		t.Fatalf("the limited shopper on another voucher: %d %v, want 200 (the limit is per voucher)", status, body)
	}

	for i, h := range []*harness{a, b, a} {
		if status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": "1390000000" + idString(int64(i))}); status != 200 {
			t.Fatalf("code %d: %d %v", i, status, body)
		}
	}
	req, _ := http.NewRequest("POST", b.base+"/api/auth/code", strings.NewReader(`{"phone":"13900000009"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("fourth code from one IP within a minute: %d (Retry-After %q), want 429 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestMetricsMoveDuringASale: after a sale the counters and the queue
// gauges are at /metrics, with values that moved.
func TestMetricsMoveDuringASale(t *testing.T) {
	forEachBackendAndStack(t, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(3)
		for u := int64(1); u <= 5; u++ {
			h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
		}
		h.waitForRows(voucher, 3, 10*time.Second)
		want := []string{
			`seckill_requests_total{code="ok",queue="` + h.cfg.Queue + `"} 3`,
			`seckill_requests_total{code="sold_out",queue="` + h.cfg.Queue + `"} 2`,
			`seckill_reservation_seconds_count{queue="` + h.cfg.Queue + `"} 5`,
		}
		if h.cfg.Queue != "sync" {
			want = append(want,
				`seckill_orders_persisted_total{queue="`+h.cfg.Queue+`"} 3`,
				`seckill_consumer_batch_size_count{queue="`+h.cfg.Queue+`"}`,
				`seckill_queue_dead_letters{queue="`+h.cfg.Queue+`"} 0`,
			)
		}
		deadline := time.Now().Add(5 * time.Second)
		var text string
		for {
			req, _ := http.NewRequest("GET", h.base+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+h.cfg.AdminToken)
			resp, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			text = string(raw)
			missing := ""
			for _, w := range want {
				if !strings.Contains(text, w) {
					missing = w
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/metrics lacks %q", missing)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestTheOperatorListsEveryVoucher: GET /api/admin/vouchers lists every
// voucher newest first — on sale, upcoming and ended — with the
// database's stock and the orders by state, a page at a time; it is the
// admin's alone, and a bad page size is a 400 naming it.
func TestTheOperatorListsEveryVoucher(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		endsAt := time.Now().Add(time.Second)
		ended := h.createVoucher(5, time.Now().Add(-time.Minute), endsAt)
		upcoming := h.createVoucher(7, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
		onSale := h.openVoucher(3)
		var orders []string
		for u := int64(1); u <= 2; u++ {
			status, body := h.do("POST", "/api/vouchers/"+idString(onSale)+"/seckill", h.shopper(u), nil)
			if status != 200 {
				t.Fatalf("buy: %d %v", status, body)
			}
			orders = append(orders, body["orderId"].(string))
		}
		h.waitForRows(onSale, 2, 10*time.Second)
		if status, body := h.do("POST", "/api/orders/"+orders[0]+"/cancel", h.shopper(1), nil); status != 200 {
			t.Fatalf("cancel: %d %v", status, body)
		}
		time.Sleep(time.Until(endsAt.Add(50 * time.Millisecond))) // the first sale ends

		if status, _ := h.do("GET", "/api/admin/vouchers", h.shopper(1), nil); status != 401 {
			t.Fatalf("a shopper's token: %d, want 401", status)
		}
		if status, body := h.do("GET", "/api/admin/vouchers?limit=101", h.cfg.AdminToken, nil); status != 400 || !strings.Contains(fmt.Sprint(body), "limit") {
			t.Fatalf("limit=101: %d %v, want 400 naming limit", status, body)
		}
		status, first := h.do("GET", "/api/admin/vouchers?limit=2", h.cfg.AdminToken, nil)
		page, _ := first["vouchers"].([]any)
		if status != 200 || len(page) != 2 {
			t.Fatalf("first page: %d %v", status, first)
		}
		got := map[int64]map[string]any{}
		add := func(list []any) {
			for _, v := range list {
				m := v.(map[string]any)
				got[int64(m["id"].(float64))] = m
			}
		}
		add(page)
		if id := int64(page[0].(map[string]any)["id"].(float64)); id != onSale {
			t.Fatalf("first listed %d, want the newest, %d", id, onSale)
		}
		status, second := h.do("GET", "/api/admin/vouchers?limit=2&before="+fmt.Sprint(first["next"]), h.cfg.AdminToken, nil)
		if status != 200 {
			t.Fatalf("second page: %d %v", status, second)
		}
		add(second["vouchers"].([]any))
		want := map[int64]string{
			onSale:   "on_sale databaseStock=2 orders=map[cancelled:1 paid:0 refunded:0 unpaid:1]",
			upcoming: "upcoming databaseStock=7 orders=map[cancelled:0 paid:0 refunded:0 unpaid:0]",
			ended:    "ended databaseStock=5 orders=map[cancelled:0 paid:0 refunded:0 unpaid:0]",
		}
		for id, w := range want {
			m := got[id]
			if m == nil {
				t.Fatalf("voucher %d not listed in %v", id, got)
			}
			if line := fmt.Sprintf("%v databaseStock=%v orders=%v", m["state"], m["databaseStock"], m["orders"]); line != w {
				t.Errorf("voucher %d: %s, want %s", id, line, w)
			}
		}
	})
}
