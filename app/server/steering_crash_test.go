package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAStockChangeKilledBetweenItsHalvesCountsOnce: an instance is asked
// for +20; it records the action and moves Redis's stock, then waits on
// the stock row, which the test holds locked, and is SIGKILLed there. The
// other instance's duty finishes the action: the column moves once, and
// Redis's stock is not moved twice (70, not 90); the sale then sells 70.
// A voucher in buckets is killed inside the reconcile's fence, its
// buckets drained into the reconcile: the fence lapses, and the finish
// deals the column's units once.
func TestAStockChangeKilledBetweenItsHalvesCountsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("process kill skipped in -short mode")
	}
	for _, buckets := range []int{1, 3} {
		t.Run(strconv.Itoa(buckets)+" buckets", func(t *testing.T) { stockChangeKilledBetweenHalves(t, buckets) })
	}
}

func stockChangeKilledBetweenHalves(t *testing.T, buckets int) {
	h := startServer(t, "real", func(c *Config) { c.Shards = max(c.Shards, buckets) })
	childBase, child := childServer(t, h.cfg, "SECKILL_SHARDS="+strconv.Itoa(h.cfg.Shards))
	voucher := h.openVoucherIn(50, buckets)
	ctx := context.Background()
	lock, err := h.srv.store.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	var got int64
	if err := lock.NewRaw("SELECT voucher_id FROM tb_seckill_voucher WHERE voucher_id = ? FOR UPDATE", voucher).Scan(ctx, &got); err != nil {
		t.Fatal(err)
	}
	go doQuiet(h.client, childBase, "POST", "/api/admin/vouchers/"+idString(voucher)+"/stock", h.cfg.AdminToken, map[string]any{"delta": 20})

	// Between the halves: Redis has the units, the column's update waits.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil)
		var waiting int
		if err := h.srv.store.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
			"WHERE DB = DATABASE() AND INFO LIKE 'UPDATE `tb_seckill_voucher`%'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		// In buckets, the live half is the fence: no stock reads until
		// the column has moved.
		if (v["stock"] == 70.0 || buckets > 1) && waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance never got between the halves: stock %v, %d updates waiting", v["stock"], waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL: nothing of it runs again
		t.Fatal(err)
	}
	child.Wait()
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}

	// The survivor finishes it: once its lock lapses and the record is old.
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, column := h.rows(voucher)
		_, body := h.do("GET", "/api/admin/actions?voucher="+idString(voucher), h.cfg.AdminToken, nil)
		items, _ := body["items"].([]any)
		if column == 70 && len(items) == 1 && strings.Contains(fmt.Sprint(items[0]), "applied:true") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the action was not finished: column %d, record %v", column, items)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["stock"] != 70.0 {
		t.Fatalf("Redis's stock %v after the finish, want 70 (the units moved once)", v["stock"])
	}
	sold := 0
	for u := int64(1); u <= 80; u++ {
		if status, _ := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status == 200 {
			sold++
		}
	}
	h.waitForRows(voucher, 70, 15*time.Second)
	if rows, column := h.rows(voucher); sold != 70 || rows != 70 || column != 0 {
		t.Fatalf("%d sold, %d rows, column %d; want 70, 70, 0", sold, rows, column)
	}
}
