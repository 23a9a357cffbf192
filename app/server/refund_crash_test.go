package server

import (
	"context"
	"testing"
	"time"
)

// TestARefundKilledBetweenItsHalvesIsFinishedOnce: an instance begins a
// refund with its unit (the order refunding, the stock column +1, the
// unit back to Redis), then waits on the provider — the sandbox's books,
// which the test holds locked — and is SIGKILLed there. The other
// instance's duty finishes it: one refund at the provider, the order
// refunded, the unit back once (stock +1, not +2), the shopper free to
// buy again. And money of a second payment of the order, taken meanwhile
// and given back by its notice, does not finish the operator's refund in
// its place: the order stays refunding until the duty has the first
// payment's money back too.
func TestARefundKilledBetweenItsHalvesIsFinishedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("process kill skipped in -short mode")
	}
	h := startServer(t, "real", nil)
	childBase, child := childServer(t, h.cfg, "SECKILL_PAY_SECRET="+h.cfg.PaySecret, "SECKILL_PAY_PROVIDER=sandbox")
	voucher := h.openVoucher(1)
	order := boughtAndPersisted(t, h, voucher, 1, 1)
	payment, _ := startPayment(t, h, 1, order)
	second, amount := startPayment(t, h, 1, order)
	if status, body := h.do("POST", "/api/payments/sandbox/"+payment+"/complete", "", map[string]string{"status": "succeeded"}); status != 200 || body["result"] != "paid" {
		t.Fatalf("pay: %d %v", status, body)
	}
	ctx := context.Background()
	lock, err := h.srv.store.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	var got string
	if err := lock.NewRaw("SELECT id FROM tb_paysandbox_payment WHERE id = ? FOR UPDATE", payment).Scan(ctx, &got); err != nil {
		t.Fatal(err)
	}
	go doQuiet(h.client, childBase, "POST", "/api/admin/orders/"+order+"/refund", h.cfg.AdminToken, map[string]any{"returnUnit": true})

	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting int
		if err := h.srv.store.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
			"WHERE DB = DATABASE() AND INFO LIKE 'UPDATE `tb_paysandbox_payment`%'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if _, column := h.rows(voucher); column == 1 && waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance never got between the halves (%d waiting)", waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL: nothing of it runs again
		t.Fatal(err)
	}
	child.Wait()
	// The second payment's money comes while the refund is unfinished: it
	// goes back at once, and the order is still the duty's to finish.
	if status, body := notify(h, noticeBody(second, order, amount, "succeeded", "late_"+order), ""); status != 200 || body["result"] != "refunded" {
		t.Fatalf("the second payment's notice: %d %v, want its money given back", status, body)
	}
	var refunding int
	if err := h.srv.store.DB().NewRaw("SELECT status FROM tb_voucher_order WHERE id = ?", order).Scan(ctx, &refunding); err != nil || refunding != 5 {
		t.Fatalf("after the second payment's refund the order's status code is %d (%v), want 5: the operator's refund unfinished", refunding, err)
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The order shows refunded from the begin on (its money is on its way
	// back); the provider's books say when the refund is made.
	var word map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		word = sandboxSays(t, h, payment)
		if word["status"] == "refunded" || time.Now().After(deadline) {
			break
		}
	}
	if refunds, _ := word["refunds"].([]any); len(refunds) != 1 || word["status"] != "refunded" {
		t.Fatalf("after the kill, the sandbox says %v; want the refund finished, once", word)
	}
	var status int
	if err := h.srv.store.DB().NewRaw("SELECT status FROM tb_voucher_order WHERE id = ?", order).Scan(ctx, &status); err != nil || status != 6 {
		t.Fatalf("the order's status code is %d (%v), want 6: refunded", status, err)
	}
	if _, column := h.rows(voucher); column != 1 {
		t.Fatalf("the stock column is %d, want 1: the unit back once", column)
	}
	if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 200 {
		t.Fatalf("the refunded shopper buys the unit again: %d %v", status, body)
	}
	if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(2), nil); status != 409 || errorCode(body) != "sold_out" {
		t.Fatalf("a second buyer: %d %v, want sold out (the unit came back once)", status, body)
	}
}
