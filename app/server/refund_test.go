package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// paidOrder buys a unit for shopper u and pays it through the sandbox.
func paidOrder(t *testing.T, h *harness, voucher, u int64, rows int) (order, payment string) {
	t.Helper()
	order = boughtAndPersisted(t, h, voucher, u, rows)
	payment, _ = startPayment(t, h, u, order)
	if status, body := h.do("POST", "/api/payments/sandbox/"+payment+"/complete", "", map[string]string{"status": "succeeded"}); status != 200 || body["result"] != "paid" {
		t.Fatalf("pay: %d %v", status, body)
	}
	return order, payment
}

// TestAnOperatorRefundsAPaidOrderOnce: a paid order refunded from two
// instances at once is refunded once at the provider, its unit back on
// sale once (stock +1), one action recorded; asked again it answers
// refunded; an unpaid order is 409 not_refundable.
func TestAnOperatorRefundsAPaidOrderOnce(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		other := h
		if h.cfg.RedisURL != "" { // the stand-ins are each instance's own
			other = startWith(t, h.cfg)
		}
		voucher := h.openVoucher(2)
		order, payment := paidOrder(t, h, voucher, 1, 1)
		unpaid := boughtAndPersisted(t, h, voucher, 2, 2)
		path := "/api/admin/orders/" + order + "/refund"
		if status, body := h.do("POST", path, "", map[string]any{"returnUnit": true}); status != 401 {
			t.Fatalf("a refund without the admin token: %d %v", status, body)
		}
		var wg sync.WaitGroup
		statuses := make([]int, 4)
		for i := range statuses {
			at := []*harness{h, other}[i%2]
			wg.Go(func() {
				statuses[i], _ = at.do("POST", path, h.cfg.AdminToken, map[string]any{"returnUnit": true, "note": "scalper"})
			})
		}
		wg.Wait()
		for _, s := range statuses {
			if s != 200 {
				t.Fatalf("four refunds of one order at once: %v, want 200 each", statuses)
			}
		}
		if got := orderStatus(h, 1, order, "refunded", 5*time.Second); got != "refunded" {
			t.Fatalf("the refunded order is %s", got)
		}
		word := sandboxSays(t, h, payment)
		if refunds, _ := word["refunds"].([]any); len(refunds) != 1 || word["status"] != "refunded" {
			t.Fatalf("the sandbox says %v, want one refund", word)
		}
		if _, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["stock"] != 1.0 {
			t.Fatalf("stock %v, want 1: the refunded order's unit back once, the unpaid one's still held", v["stock"])
		}
		if _, column := h.rows(voucher); column != 1 {
			t.Fatalf("the stock column %d, want 1", column)
		}
		_, actions := h.do("GET", "/api/admin/actions?voucher="+idString(voucher), h.cfg.AdminToken, nil)
		items, _ := actions["items"].([]any)
		if len(items) != 1 || !strings.Contains(fmt.Sprint(items[0]), "refund") || !strings.Contains(fmt.Sprint(items[0]), "scalper") {
			t.Fatalf("the action log %v, want one refund with its note", items)
		}
		if status, body := h.do("POST", path, h.cfg.AdminToken, nil); status != 200 || body["status"] != "refunded" || body["already"] != true {
			t.Fatalf("refund it again: %d %v, want 200 refunded already", status, body)
		}
		if status, body := h.do("POST", "/api/admin/orders/"+unpaid+"/refund", h.cfg.AdminToken, nil); status != 409 || errorCode(body) != "not_refundable" {
			t.Fatalf("refund an unpaid order: %d %v, want 409 not_refundable", status, body)
		}
		// The refunded shopper may buy again: the unit and the mark came back.
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 200 {
			t.Fatalf("the refunded shopper buys again: %d %v", status, body)
		}
	})
}

// TestASweepRefundsEveryPaidOrderItNames: a dry run counts, the sweep
// refunds each paid order of the voucher once and, keeping the units,
// leaves the stock as it was: live orders + refunds that kept their unit
// = initial − stock.
func TestASweepRefundsEveryPaidOrderItNames(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(4)
		for u := int64(1); u <= 3; u++ {
			paidOrder(t, h, voucher, u, int(u))
		}
		boughtAndPersisted(t, h, voucher, 4, 4) // unpaid: not matched
		sweep := map[string]any{"voucher": idString(voucher), "dryRun": true}
		if status, body := h.do("POST", "/api/admin/orders/refund", h.cfg.AdminToken, sweep); status != 200 || body["matched"] != 3.0 {
			t.Fatalf("dry run: %d %v, want 3 matched", status, body)
		}
		sweep["dryRun"], sweep["note"] = false, "mispriced"
		if status, body := h.do("POST", "/api/admin/orders/refund", h.cfg.AdminToken, sweep); status != 200 || body["refunded"] != 3.0 || body["skipped"] != 0.0 {
			t.Fatalf("sweep: %d %v, want 3 refunded", status, body)
		}
		if status, body := h.do("POST", "/api/admin/orders/refund", h.cfg.AdminToken, sweep); status != 200 || body["matched"] != 0.0 {
			t.Fatalf("sweep again: %d %v, want none left to refund", status, body)
		}
		var live, kept int
		db := h.srv.store.DB()
		ctx := context.Background()
		if err := db.NewRaw("SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ? AND status IN (1, 2)", voucher).Scan(ctx, &live); err != nil {
			t.Fatal(err)
		}
		if err := db.NewRaw("SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ? AND status = 6 AND cancel_reason = 'operator_kept'", voucher).Scan(ctx, &kept); err != nil {
			t.Fatal(err)
		}
		if _, column := h.rows(voucher); live != 1 || kept != 3 || live+kept != 4-int(column) {
			t.Fatalf("%d live, %d refunded keeping their unit, stock column %d; want 1 + 3 = 4 − 0", live, kept, column)
		}
		if _, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["stock"] != 0.0 {
			t.Fatalf("stock %v, want 0: the units stay sold", v["stock"])
		}
	})
}
