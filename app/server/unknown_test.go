package server

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
)

// queryCounter counts the statements a bun database runs.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	q.n.Add(1)
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
		queries := &queryCounter{}
		//lint:ignore SA1019 the hook must count the server's own queries; WithQueryHook returns a clone the server never uses
		h.srv.Store().DB().AddQueryHook(queries)
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
		if n := queries.n.Load(); n > ids*lifetimes {
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
