package server

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
)

// queryCounter counts the statements a bun database runs for requests
// (not for the server's duties: the sweeps, the reconciliation, the
// metrics).
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	if ctx.Value(requestContextKey{}) != nil {
		q.n.Add(1)
	}
	return ctx
}
func (*queryCounter) AfterQuery(context.Context, *bun.QueryEvent) {}

// TestUnknownVoucherIDsCostTheDatabaseLittleAndMeetTheLimit: requests for
// made-up voucher ids — a scanner reading, one token buying in a loop —
// cost the database one look-up per id for a while, not one each, and the
// shopper's limit holds before any look-up (only the reservation script
// counted it, which an unknown id never reaches).
func TestUnknownVoucherIDsCostTheDatabaseLittleAndMeetTheLimit(t *testing.T) {
	forEachStack(t, func(c *Config) { c.Consumers, c.SeckillRate = 0, 5 }, func(t *testing.T, h *harness) {
		queries, counted := h.requestQueries, h.requestQueries.n.Load()
		start := time.Now()
		const reads, ids = 300, 3
		for i := range reads {
			id := 900000 + int64(i%ids)
			if status, body := h.do("GET", "/api/vouchers/"+idString(id), "", nil); status != 404 || errorCode(body) != "voucher_not_found" {
				t.Fatalf("unknown voucher %d: %d %v", id, status, body)
			}
		}
		// One look-up per id per lifetime of the memory (under a second),
		// and once more after the nudge subscription starts (it clears
		// the memory, since nudges may have been missed before it).
		lifetimes := int64(time.Since(start)/(900*time.Millisecond)) + 2
		if n := queries.n.Load() - counted; n == 0 {
			t.Fatalf("%d reads of unknown ids counted no statement: the counter does not see the requests' statements", reads)
		} else if n > ids*lifetimes {
			t.Fatalf("%d reads of %d unknown ids ran %d statements in %v; want at most %d", reads, ids, n, time.Since(start), ids*lifetimes)
		}

		token := h.shopper(7)
		codes := map[string]int{}
		for range 40 {
			_, body := h.do("POST", "/api/vouchers/999999/seckill", token, nil)
			codes[errorCode(body)]++
		}
		if codes["rate_limited"] < 25 || codes["rate_limited"]+codes["voucher_not_found"] != 40 {
			t.Fatalf("40 seckills of an unknown voucher with one token at a limit of 5/s: %v; want mostly rate_limited", codes)
		}
	})
}

// TestAVoucherCreatedElsewhereIsKnownAtOnce: an instance that has just
// answered voucher_not_found for an id (and remembers it) knows the
// voucher another instance then creates under that id within a second —
// at once, when the nudge arrives.
func TestAVoucherCreatedElsewhereIsKnownAtOnce(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, a *harness) {
		if a.srv.mini != nil {
			t.Skip("on the stand-ins each instance has a database of its own")
		}
		cfgB := a.cfg
		cfgB.Consumers = 0
		b := startWith(t, cfgB)
		first := a.openVoucher(1)
		next := first + 1 // the database's next id: nothing else creates vouchers here
		if status, body := b.do("GET", "/api/vouchers/"+idString(next), "", nil); status != 404 {
			t.Fatalf("the next id before it exists: %d %v", status, body)
		}
		if id := a.openVoucher(1); id != next {
			t.Fatalf("created voucher %d, want %d", id, next)
		}
		created := time.Now()
		for {
			status, body := b.do("GET", "/api/vouchers/"+idString(next), "", nil)
			if status == 200 {
				break
			}
			if status != 404 || time.Since(created) > time.Second {
				t.Fatalf("instance B %v after the voucher was created on A: %d %v", time.Since(created), status, body)
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("instance B knew the voucher %v after it was created", time.Since(created).Round(time.Millisecond))
		seckill := "/api/vouchers/" + strconv.FormatInt(next, 10) + "/seckill"
		if status, body := b.do("POST", seckill, b.shopper(1), nil); status != 200 {
			t.Fatalf("buying the new voucher on B: %d %v", status, body)
		}
	})
}

// TestMadeUpVoucherIDsAboveTheHighestCostNoQueryEach: the outside review's
// 300 unknown voucher ids cost 328 statements. Ids above the highest
// voucher now cost one read of the highest id per lifetime of it, however
// many, from however many addresses.
func TestMadeUpVoucherIDsAboveTheHighestCostNoQueryEach(t *testing.T) {
	forEachStack(t, func(c *Config) {
		c.Consumers = 0
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}, func(t *testing.T, h *harness) {
		highest := h.openVoucher(1)
		queries, counted := h.requestQueries, h.requestQueries.n.Load()
		start := time.Now()
		for i := range 300 {
			id := highest + 1 + int64(i)*7919
			from := http.Header{"X-Forwarded-For": {fmt.Sprintf("198.51.100.%d", i%250+1)}}
			if status, body, _ := h.request("GET", "/api/vouchers/"+idString(id), "", nil, from); status != 404 || errorCode(body) != "voucher_not_found" {
				t.Fatalf("made-up voucher %d: %d %v", id, status, body)
			}
		}
		n, most := queries.n.Load()-counted, int64(time.Since(start)/core.DefaultUnknownLifetime)+2
		if n > most {
			t.Fatalf("300 made-up ids above the highest ran %d statements in %v, want at most %d (a read of the highest per lifetime)", n, time.Since(start), most)
		}
		t.Logf("300 made-up ids from 250 addresses: %d statements in %v", n, time.Since(start).Round(time.Millisecond))
		if status, _ := h.do("GET", "/api/vouchers/"+idString(highest), "", nil); status != 200 {
			t.Fatalf("the highest voucher: %d", status)
		}
	})
}

// TestMissesPerAddressAreLimited: past SECKILL_MISS_RATE answers
// voucher_not_found a minute, an address's misses are 429 with
// Retry-After; its reads of a voucher that exists still answer, and
// another address still gets its 404s.
func TestMissesPerAddressAreLimited(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) {
		c.MissRate = 60
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	voucher := h.openVoucher(5)
	scanner := http.Header{"X-Forwarded-For": {"203.0.113.9"}}
	for i := range 60 {
		if status, body, _ := h.request("GET", "/api/vouchers/"+idString(voucher+1+int64(i)), "", nil, scanner); status != 404 {
			t.Fatalf("miss %d: %d %v, want 404 within the limit", i+1, status, body)
		}
	}
	status, body, header := h.request("GET", "/api/vouchers/"+idString(voucher+100), "", nil, scanner)
	if status != 429 || errorCode(body) != "rate_limited" || header.Get("Retry-After") == "" {
		t.Fatalf("the 61st miss: %d %v (Retry-After %q), want 429 rate_limited", status, body, header.Get("Retry-After"))
	}
	if status, body, _ := h.request("POST", "/api/vouchers/"+idString(voucher+101)+"/seckill", h.shopper(3), nil, scanner); status != 429 {
		t.Fatalf("a seckill of a made-up voucher past the limit: %d %v, want 429", status, body)
	}
	if status, body, _ := h.request("GET", "/api/vouchers/"+idString(voucher), "", nil, scanner); status != 200 {
		t.Fatalf("a voucher that exists, from the limited address: %d %v", status, body)
	}
	if status, body, _ := h.request("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(3), nil, scanner); status != 200 {
		t.Fatalf("buying a voucher that exists, from the limited address: %d %v", status, body)
	}
	if status, _, _ := h.request("GET", "/api/vouchers/"+idString(voucher+100), "", nil, http.Header{"X-Forwarded-For": {"203.0.113.10"}}); status != 404 {
		t.Fatalf("another address: %d, want its own 404", status)
	}
}

// TestPayAndCancelOfAMadeUpRecentOrderAre404AtOnce: the outside review's
// made-up recent order id waited a second and ran ~63 statements, and
// that time told it from a real one. Neither the live store nor the
// database holding it, it is 404 at once; a real order still queued
// (no consumer) is waited for and told to ask again; another shopper's
// queued order is 404 at once too.
func TestPayAndCancelOfAMadeUpRecentOrderAre404AtOnce(t *testing.T) {
	forEachStack(t, func(c *Config) { c.Consumers = 0 }, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(5)
		owner := h.shopper(11)
		status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", owner, nil)
		if status != 200 {
			t.Fatalf("seckill: %d %v", status, body)
		}
		queued := body["orderId"].(string)
		madeUp := strconv.FormatInt(int64(time.Since(redisreserve.Epoch)/time.Second)<<32|987654, 10)
		queries := h.requestQueries
		for _, c := range []struct {
			who, order, action string
			status             int
			code               string
			quick              bool
		}{
			{"a made-up id", madeUp, "pay", 404, "order_not_found", true},
			{"a made-up id", madeUp, "cancel", 404, "order_not_found", true},
			{"another shopper's queued order", queued, "pay", 404, "order_not_found", true},
			{"another shopper's queued order", queued, "cancel", 404, "order_not_found", true},
			{"the owner's queued order", queued, "pay", 409, "not_payable", false},
		} {
			token := h.shopper(12)
			if c.who == "the owner's queued order" {
				token = owner
			}
			before, start := queries.n.Load(), time.Now()
			status, body := h.do("POST", "/api/orders/"+c.order+"/"+c.action, token, nil)
			took, statements := time.Since(start), queries.n.Load()-before
			if status != c.status || errorCode(body) != c.code {
				t.Fatalf("%s, %s: %d %v, want %d %s", c.who, c.action, status, body, c.status, c.code)
			}
			t.Logf("%s, %s: %d %s in %v after %d statements", c.who, c.action, status, errorCode(body), took.Round(time.Millisecond), statements)
			if c.quick && (took > 300*time.Millisecond || statements > 12) {
				t.Errorf("%s, %s: answered in %v after %d statements, want at once (no waiting for it)", c.who, c.action, took, statements)
			}
			if !c.quick && took < 500*time.Millisecond {
				t.Errorf("%s, %s: answered in %v, want the wait for its consumer", c.who, c.action, took)
			}
		}
	})
}
