package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestAVoucherOfAHundredThousandBuyersIsRebuiltWithinItsFence: Redis
// forgets a voucher whose 100,000 orders are in the database; the rebuild
// (database snapshot, queue, restore in chunks) finishes within its own
// deadline — half its 10 s fence — and the shoppers then meet the whole
// sale: each buyer refused, the units left on sale.
//
// Under the race detector (make test), and on the stand-ins, the same path
// runs with 10,000 buyers: the detector makes the rebuild's Go code several
// times slower than the server the fence is sized for, and miniredis's Lua
// and the in-memory SQLite are slower than the servers. The 100,000 figure
// comes from a run without it:
//
//	go test -run TestAVoucherOfAHundredThousandBuyersIsRebuiltWithinItsFence -v ./app/server
func TestAVoucherOfAHundredThousandBuyersIsRebuiltWithinItsFence(t *testing.T) {
	// The operator's request waits as long as the rebuild may take (its
	// own deadline, half the fence), not the shoppers' 2 s.
	forEachStack(t, func(c *Config) { c.Queue, c.RequestTimeout = "streamgroup", 10*time.Second }, func(t *testing.T, h *harness) {
		const left = 10
		buyers := int64(100_000)
		if h.cfg.EmbeddedRedis() || raceDetector {
			buyers = 10_000
		}
		voucher := h.openVoucher(buyers + left)
		ctx := context.Background()
		db := h.srv.store.DB()
		now := time.Now().UTC().Format("2006-01-02 15:04:05")
		for from := int64(1); from <= buyers; from += 5000 {
			var rows []string
			for u := from; u < from+5000 && u <= buyers; u++ {
				rows = append(rows, fmt.Sprintf("(%d, %d, %d, 1, '%s', '%s')", 1_000_000_000+u, u, voucher, now, now))
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO tb_voucher_order (id, user_id, voucher_id, status, create_time, update_time) VALUES "+
				strings.Join(rows, ",")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = ? WHERE voucher_id = ?", left, voucher); err != nil {
			t.Fatal(err)
		}
		forgetSale(t, h)
		start := time.Now()
		status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/reconcile", h.cfg.AdminToken, nil)
		took := time.Since(start)
		if status != 200 || body["buyersAfter"] != float64(buyers) || body["stockAfter"] != float64(left) {
			t.Fatalf("rebuild of %d buyers: %d %v (after %v)", buyers, status, body, took)
		}
		t.Logf("rebuilt %d buyers in %v", buyers, took.Round(time.Millisecond))
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(buyers/2), nil); status != 409 || errorCode(body) != "already_purchased" {
			t.Fatalf("a buyer after the rebuild: %d %v, want 409 already_purchased", status, body)
		}
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(buyers+1), nil); status != 200 {
			t.Fatalf("a new shopper after the rebuild: %d %v, want one of the %d units left", status, body, left)
		}
	})
}
