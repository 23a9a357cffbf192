package server

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisclock"
	"github.com/seckill-lab/seckill/adapters/testenv/faultproxy"
)

// startFaultProxy starts a proxy to backend, closed when the test ends.
func startFaultProxy(t *testing.T, backend string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(backend, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// mysqlThroughProxy points cfg's MySQL DSN at a fault proxy to its
// server, and returns the proxy.
func mysqlThroughProxy(t *testing.T, c *Config) *faultproxy.Proxy {
	t.Helper()
	at := strings.Index(c.MySQLDSN, "tcp(") + len("tcp(")
	end := strings.Index(c.MySQLDSN[at:], ")") + at
	p := startFaultProxy(t, c.MySQLDSN[at:end])
	c.MySQLDSN = c.MySQLDSN[:at] + p.Addr() + c.MySQLDSN[end:]
	return p
}

// TestADependencyThatStopsAnsweringCostsARequestItsDeadline: Redis, then
// MySQL, stop answering without closing their connections. Every request
// that needs them is answered 503 unavailable with Retry-After within its
// deadline (SECKILL_REQUEST_TIMEOUT, 500 ms here) instead of hanging until
// the client gives up; nothing is reserved for a request that timed out.
func TestADependencyThatStopsAnsweringCostsARequestItsDeadline(t *testing.T) {
	const deadline = 500 * time.Millisecond
	for _, dep := range []string{"redis", "mysql", "mysql-sync"} {
		t.Run(dep, func(t *testing.T) {
			var hole *faultproxy.Proxy
			h := startServer(t, "real", func(c *Config) {
				c.RequestTimeout = deadline
				if dep == "mysql-sync" {
					c.Queue = "sync" // MySQL is the order path
				}
				if dep == "redis" {
					u, _ := url.Parse(c.RedisURL)
					hole = startFaultProxy(t, u.Host)
					u.Host = hole.Addr()
					c.RedisURL = u.String()
				} else {
					hole = mysqlThroughProxy(t, c)
				}
			})
			// Before the server's stop: its connections reset, so the stop
			// does not wait out the fault.
			t.Cleanup(hole.Close)
			voucher := h.openVoucher(100)
			path := "/api/vouchers/" + idString(voucher)
			status, body := h.do("POST", path+"/seckill", h.shopper(1), nil)
			if status != 200 {
				t.Fatalf("before the fault: %d %v", status, body)
			}
			order := body["orderId"].(string)
			h.waitForRows(voucher, 1, 10*time.Second)
			hole.Silence()
			requests := map[string]string{
				"seckill":      "POST " + path + "/seckill",
				"order status": "GET " + path + "/order",
				"order":        "GET /api/orders/" + order,
			}
			var wg sync.WaitGroup
			for name, req := range requests {
				for u := int64(2); u <= 6; u++ {
					wg.Go(func() {
						method, p, _ := strings.Cut(req, " ")
						start := time.Now()
						status, body, header := h.doWithHeader(method, p, h.shopper(u))
						took := time.Since(start)
						if status == 503 && errorCode(body) == "unavailable" && header.Get("Retry-After") != "" && took < deadline+time.Second {
							return
						}
						// What needs neither dependency may still succeed.
						if status < 500 && !(dep != "mysql" && name == "seckill") {
							return
						}
						t.Errorf("%s with %s not answering: %d %v (Retry-After %q) after %v; want 503 unavailable with Retry-After within %v",
							name, dep, status, body, header.Get("Retry-After"), took.Round(time.Millisecond), deadline+time.Second)
					})
				}
			}
			wg.Wait()
		})
	}
}

// withRequestDeadline is newRequestDeadline with context.WithDeadline's
// signature, for the tests to hold it to that function's behaviour.
func withRequestDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	r := newRequestDeadline(parent, deadline)
	return r, r.cancel
}

// TestRequestDeadlineIsADeadline: the lazily armed request deadline
// behaves as context.WithDeadline's wherever the request's code can tell
// — before anything waits on it, once something does, for a context
// derived from it, after its cancel — and arms no timer for a request
// that never waits.
func TestRequestDeadlineIsADeadline(t *testing.T) {
	t.Run("never waited on: no timer, its deadline known, over at its cancel", func(t *testing.T) {
		at := time.Now().Add(time.Hour)
		ctx, cancel := withRequestDeadline(context.Background(), at)
		if d, ok := ctx.Deadline(); !ok || !d.Equal(at) {
			t.Fatalf("deadline %v %v, want %v", d, ok, at)
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("err %v before the deadline", err)
		}
		cancel()
		if a := ctx.(*requestDeadline).state.Load(); a == nil || a.ctx != nil {
			t.Fatalf("a timer was armed for a context nothing waited on: %+v", a)
		}
		select {
		case <-ctx.Done():
		default:
			t.Fatal("Done is open after cancel")
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("err %v after cancel, want Canceled", ctx.Err())
		}
	})
	t.Run("past its deadline before anything waited", func(t *testing.T) {
		ctx, cancel := withRequestDeadline(context.Background(), time.Now().Add(-time.Millisecond))
		defer cancel()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v, want DeadlineExceeded", ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			t.Fatal("Done of a context past its deadline did not close")
		}
	})
	t.Run("waited on: closes at the deadline, a derived context with it", func(t *testing.T) {
		ctx, cancel := withRequestDeadline(context.Background(), time.Now().Add(50*time.Millisecond))
		defer cancel()
		child, cancelChild := context.WithCancel(ctx)
		defer cancelChild()
		start := time.Now()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the derived context outlived the deadline")
		}
		if waited := time.Since(start); waited < 40*time.Millisecond {
			t.Fatalf("closed after %v, before the deadline", waited)
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("errs %v and %v, want DeadlineExceeded", ctx.Err(), child.Err())
		}
	})
	t.Run("cancel releases a waiter and what was derived", func(t *testing.T) {
		ctx, cancel := withRequestDeadline(context.Background(), time.Now().Add(time.Hour))
		child, cancelChild := context.WithCancel(ctx)
		defer cancelChild()
		released := make(chan struct{})
		go func() {
			<-ctx.Done()
			close(released)
		}()
		time.Sleep(10 * time.Millisecond)
		cancel()
		for _, done := range []<-chan struct{}{released, child.Done()} {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("cancel did not release a waiter")
			}
		}
		if !errors.Is(child.Err(), context.Canceled) {
			t.Fatalf("child err %v, want Canceled", child.Err())
		}
	})
	t.Run("the parent: its values, its cancellation, its earlier deadline", func(t *testing.T) {
		type key struct{}
		parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		ctx, cancel := withRequestDeadline(parent, time.Now().Add(time.Hour))
		defer cancel()
		if ctx.Value(key{}) != "v" {
			t.Fatal("the parent's value is not seen before arming")
		}
		cancelParent()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("err %v after the parent's cancel, want Canceled", ctx.Err())
		}
		<-ctx.Done()
		if ctx.Value(key{}) != "v" {
			t.Fatal("the parent's value is not seen once armed")
		}
		early := time.Now().Add(time.Minute)
		short, cancelShort := context.WithDeadline(context.Background(), early)
		defer cancelShort()
		ctx2, cancel2 := withRequestDeadline(short, time.Now().Add(time.Hour))
		defer cancel2()
		if d, _ := ctx2.Deadline(); !d.Equal(early) {
			t.Fatalf("deadline %v, want the parent's earlier %v", d, early)
		}
	})
	t.Run("many waiters and a cancel at once", func(t *testing.T) {
		for range 200 {
			ctx, cancel := withRequestDeadline(context.Background(), time.Now().Add(time.Hour))
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { <-ctx.Done() })
			}
			wg.Go(func() { _ = ctx.Err(); _ = ctx.Value("k") })
			wg.Go(cancel)
			wg.Wait()
		}
	})
}

// BenchmarkRequestDeadline: what a request that never waits (one answered
// from memory) pays for its deadline, the standard library's against the
// lazily armed one, on every core at once as a loaded server does.
func BenchmarkRequestDeadline(b *testing.B) {
	for _, side := range []struct {
		name string
		with func(context.Context, time.Time) (context.Context, context.CancelFunc)
	}{{"WithDeadline", context.WithDeadline}, {"lazy", func(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
		r := newRequestDeadline(parent, d) // as the middleware calls it
		return r, nil
	}}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ctx, cancel := side.with(context.Background(), time.Now().Add(2*time.Second))
					if ctx.Err() != nil {
						b.Fatal("expired")
					}
					if cancel != nil {
						cancel()
					} else {
						ctx.(*requestDeadline).cancel()
					}
				}
			})
		})
	}
}

// TestARequestAnsweredAtItsDeadlineHoldsNoOrder: the outside fault run saw
// a shopper answered 503 at the deadline whose order was then persisted.
// The script had reached Redis just before the deadline (it waited in a
// slow Redis's queue): it reserved, and its reply came back after the
// request gave up. The script now reserves only with time left for its
// reply (a tenth of the request's timeout, at most 200 ms). Here the
// script reaches Redis 580 ms into a 600 ms deadline and its reply takes
// 40 ms more: the shopper is answered 503 and holds nothing, and the unit
// stays on sale.
func TestARequestAnsweredAtItsDeadlineHoldsNoOrder(t *testing.T) {
	const deadline = 600 * time.Millisecond
	for _, batched := range []bool{true, false} {
		t.Run(map[bool]string{true: "batched", false: "a call each"}[batched], func(t *testing.T) {
			var slow *faultproxy.Proxy
			h := startServer(t, "real", func(c *Config) {
				c.RequestTimeout = deadline
				if !batched {
					c.RedisBatch = 0
				}
				u, _ := url.Parse(c.RedisURL)
				slow = startFaultProxy(t, u.Host)
				u.Host = slow.Addr()
				c.RedisURL = u.String()
			})
			t.Cleanup(slow.Close)
			voucher := h.openVoucher(10)
			path := "/api/vouchers/" + idString(voucher)
			if status, body := h.do("POST", path+"/seckill", h.shopper(1), nil); status != 200 {
				t.Fatalf("before Redis slowed: %d %v", status, body)
			}
			h.waitForRows(voucher, 1, 10*time.Second)
			slow.SetDelays(deadline-20*time.Millisecond, 40*time.Millisecond)
			start := time.Now()
			status, body := h.do("POST", path+"/seckill", h.shopper(2), nil)
			took := time.Since(start)
			slow.SetDelays(0, 0)
			if status != 503 {
				t.Fatalf("a seckill whose script ran 20 ms before its deadline: %d %v after %v; want 503", status, body, took)
			}
			time.Sleep(time.Second)
			if status, body := h.do("GET", path+"/order", h.shopper(2), nil); status != 404 {
				t.Fatalf("answered 503 at its deadline (after %v), the shopper then holds an order: %d %v", took.Round(time.Millisecond), status, body)
			}
			if rows, _ := h.rows(voucher); rows != 1 {
				t.Fatalf("%d rows, want 1 (the shopper answered 503 holds none)", rows)
			}
			if status, body := h.do("POST", path+"/seckill", h.shopper(2), nil); status != 200 {
				t.Fatalf("the shopper's retry: %d %v; want a new order", status, body)
			}
		})
	}
}

// TestAQueuedOrderReadsQueuedWhileMySQLIsDown: the outside fault run had
// 1,595 order-status reads answered 503 while MySQL was down, though the
// queue could tell. With MySQL unreachable, a shopper whose order the
// queue still holds (reserved, not persisted: it cannot be) reads
// `queued`; one whose order was persisted before still reads 503 (paid,
// cancelled or not, only MySQL knows), but the answer names the order
// Redis knows (a later fault run read a bare 503); once MySQL is back the
// queued one is persisted and reads `created`.
func TestAQueuedOrderReadsQueuedWhileMySQLIsDown(t *testing.T) {
	var hole *faultproxy.Proxy
	h := startServer(t, "real", func(c *Config) { hole = mysqlThroughProxy(t, c) })
	t.Cleanup(hole.Close)
	voucher := h.openVoucher(10)
	path := "/api/vouchers/" + idString(voucher)
	status, first := h.do("POST", path+"/seckill", h.shopper(1), nil)
	if status != 200 {
		t.Fatalf("before the fault: %d %v", status, first)
	}
	h.waitForRows(voucher, 1, 10*time.Second)
	hole.SetDown(true)
	status, body := h.do("POST", path+"/seckill", h.shopper(2), nil)
	if status != 200 {
		t.Fatalf("a seckill with MySQL down (Redis takes it): %d %v", status, body)
	}
	order := body["orderId"]
	for range 20 { // a crowd polling, sharing looks at the queue
		if status, body := h.do("GET", path+"/order", h.shopper(2), nil); status != 200 || body["status"] != "queued" || body["orderId"] != order {
			t.Fatalf("the queued order's status with MySQL down: %d %v; want 200 queued %v", status, body, order)
		}
	}
	if status, body := h.do("GET", path+"/order", h.shopper(1), nil); status != 503 || errorField(body, "orderId") != first["orderId"] {
		t.Fatalf("a persisted order's status with MySQL down: %d %v; want 503 (only MySQL knows it) naming order %v", status, body, first["orderId"])
	}
	hole.SetDown(false)
	h.waitForRows(voucher, 2, 20*time.Second)
	if status, body := h.do("GET", path+"/order", h.shopper(2), nil); status != 200 || body["status"] != "created" {
		t.Fatalf("after MySQL came back: %d %v; want created", status, body)
	}
}

// TestAnInstanceWhoseClockIsOffRedissStillSells: Redis's clock five
// seconds ahead of the instance's (the instance five seconds behind: the
// fault run's instance more than two seconds behind answered every seckill
// 503, its deadlines past by Redis's clock): once the offset is measured,
// the seckill sells and the offset is in the metrics. The stand-in's clock
// is set; a real Redis's cannot be.
func TestAnInstanceWhoseClockIsOffRedissStillSells(t *testing.T) {
	h := startServer(t, "embedded", nil)
	voucher := h.openVoucher(5)
	h.srv.mini.SetTime(time.Now().Add(5 * time.Second))
	time.Sleep(redisclock.Interval + 500*time.Millisecond) // the next measurement
	if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 200 {
		t.Fatalf("a seckill on an instance 5 s behind Redis: %d %v", status, body)
	}
	m := regexp.MustCompile(`(?m)^seckill_redis_clock_offset_seconds\{[^}]*\} (\S+)$`).FindStringSubmatch(h.metricsText())
	if m == nil {
		t.Fatal("no seckill_redis_clock_offset_seconds")
	}
	if off, _ := strconv.ParseFloat(m[1], 64); off < 2 || off > 5.5 {
		t.Fatalf("the measured offset %s s, want about 5 less the time since the clock was set", m[1])
	}
}
