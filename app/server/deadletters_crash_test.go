package server

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// TestABulkRedriveAndADiscardSurviveAKill: on the real servers, an
// instance is SIGKILLed in the middle of a bulk re-drive of 3,000 dead
// letters, and another in the middle of a discard of 1,000 (each killed
// once the register shows the action under way). The surviving instance
// finishes each by asking again; the totals hold: every re-driven order
// persisted once and the stock column taken once for each; every
// discarded order cancelled, its unit back in Redis once (the stock is the
// initial stock again, not more), the stock column untouched; nothing left
// open; a second discard does nothing.
func TestABulkRedriveAndADiscardSurviveAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills instances: not in -short")
	}
	h := startServer(t, "real", nil)
	const redriven, discarded = 3000, 1000
	for _, c := range []struct {
		action string
		n      int
		body   map[string]any
	}{
		{"redrive", redriven, nil},
		{"discard", discarded, map[string]any{"note": "killed mid-way"}},
	} {
		voucher := h.openVoucher(int64(c.n) + 10)
		vid := idString(voucher)
		setStockColumn(t, h, voucher, 0)
		buyMany(t, h, voucher, c.n)
		waitForOpen(t, h, voucher, c.n)
		if c.action == "redrive" {
			setStockColumn(t, h, voucher, int64(c.n)+10)
		}
		base, child := childServer(t, h.cfg)
		body := map[string]any{"voucher": vid}
		for k, v := range c.body {
			body[k] = v
		}
		go doQuiet(h.client, base, "POST", "/api/admin/deadletters/"+c.action, h.cfg.AdminToken, body)
		killOnceUnderWay(t, h, child, voucher, c.n)
		for more := true; more; { // a call goes on for its budget, then says there is more
			status, out := h.do("POST", "/api/admin/deadletters/"+c.action, h.cfg.AdminToken, body)
			if status != 200 {
				t.Fatalf("%s again on the surviving instance: %d %v", c.action, status, out)
			}
			more = out["more"] == true
		}
		checkTotals(t, h, voucher, c.action, c.n)
	}
}

// buyMany has n shoppers buy voucher, 8 at a time; each must be answered
// 200 (the database refuses their orders later).
func buyMany(t *testing.T, h *harness, voucher int64, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	users := make(chan int64, n)
	for u := range n {
		users <- int64(u + 1)
	}
	close(users)
	for range 8 {
		wg.Go(func() {
			for u := range users {
				if status, body := doQuiet(h.client, h.base, "POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status != 200 {
					errs <- fmt.Sprintf("shopper %d: %d %v", u, status, body)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// openLetters counts the voucher's open letters in the register.
func openLetters(t *testing.T, h *harness, voucher int64) int {
	t.Helper()
	n, err := h.srv.store.DB().NewSelect().Table("tb_dead_letter").Where("voucher_id = ? AND resolved_time IS NULL", voucher).
		Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func waitForOpen(t *testing.T, h *harness, voucher int64, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); openLetters(t, h, voucher) != n; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d letters open, want %d", openLetters(t, h, voucher), n)
		}
	}
}

// killOnceUnderWay SIGKILLs child as soon as some of the voucher's n
// letters are resolved, and fails if the action was already done.
func killOnceUnderWay(t *testing.T, h *harness, child *exec.Cmd, voucher int64, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if open := openLetters(t, h, voucher); open < n {
			child.Process.Kill()
			child.Wait()
			if open = openLetters(t, h, voucher); open == 0 {
				t.Fatal("the action was done before the kill: nothing was cut short")
			}
			t.Logf("killed with %d of %d letters still open", open, n)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the action never started")
		}
	}
}

// checkTotals: the sale adds up after the action, finished by the
// surviving instance.
func checkTotals(t *testing.T, h *harness, voucher int64, action string, n int) {
	t.Helper()
	ctx := context.Background()
	stock := int64(n) + 10
	var live, cancelled, column int64
	db := h.srv.store.DB()
	if err := db.NewSelect().Table("tb_voucher_order").ColumnExpr("SUM(status IN (1, 2)), SUM(status = 4)").
		Where("voucher_id = ?", voucher).Scan(ctx, &live, &cancelled); err != nil {
		t.Fatal(err)
	}
	if err := db.NewSelect().Table("tb_seckill_voucher").Column("stock").Where("voucher_id = ?", voucher).Scan(ctx, &column); err != nil {
		t.Fatal(err)
	}
	want := [3]int64{int64(n), 0, stock - int64(n)} // re-driven: live, cancelled, the stock column
	redisStock := stock - int64(n)
	if action == "discard" {
		want, redisStock = [3]int64{0, int64(n), 0}, stock // the column was emptied before the sale
	}
	var v map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, v = h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["stock"] == float64(redisStock) || time.Now().After(deadline) {
			break // a release the kill cut short is the sweep's, a second later
		}
	}
	if got := [3]int64{live, cancelled, column}; got != want || v["stock"] != float64(redisStock) || openLetters(t, h, voucher) != 0 {
		t.Fatalf("%s: live %d, cancelled %d, stock column %d, Redis's stock %v, %d open; want %v, Redis %d, none open",
			action, live, cancelled, column, v["stock"], openLetters(t, h, voucher), want, redisStock)
	}
	if action == "discard" {
		if status, out := h.do("POST", "/api/admin/deadletters/discard", h.cfg.AdminToken, map[string]any{"voucher": idString(voucher)}); status != 200 || out["discarded"] != float64(0) {
			t.Fatalf("a second discard: %d %v, want nothing", status, out)
		}
	}
}
