package server

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/paysandbox"
)

// sandboxSays is the sandbox's signed answer to the shop's status query of
// a payment.
func sandboxSays(t *testing.T, h *harness, payment string) map[string]any {
	t.Helper()
	sandbox := paysandbox.New(paysandbox.Config{Secret: []byte(h.cfg.PaySecret)})
	path := "/api/payments/sandbox/payments/" + payment
	req, _ := http.NewRequest("GET", h.base+path, nil)
	req.Header.Set(paysandbox.SignatureHeader, sandbox.Sign([]byte(path)))
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the sandbox's status of %s: %d %s", payment, resp.StatusCode, raw)
	}
	if !sandbox.Valid(raw, resp.Header.Get(paysandbox.SignatureHeader)) {
		t.Fatalf("the sandbox's answer is not signed with its secret: %q", resp.Header.Get(paysandbox.SignatureHeader))
	}
	return body
}

// payAt completes a payment at the sandbox (its notice lost): what the
// sandbox answered.
func payAt(t *testing.T, h *harness, payment string) map[string]any {
	t.Helper()
	status, body := h.do("POST", "/api/payments/sandbox/"+payment+"/complete", "", map[string]string{"status": "succeeded"})
	if status != 200 || body["status"] != "succeeded" || body["notice"] != "lost" || body["result"] != nil {
		t.Fatalf("complete: %d %v, want the money taken and the notice lost", status, body)
	}
	return body
}

// orderStatus waits until the order has status (or the deadline passes)
// and answers what it last had.
func orderStatus(h *harness, u int64, order, want string, within time.Duration) string {
	deadline := time.Now().Add(within)
	for {
		_, body := h.do("GET", "/api/orders/"+order, h.shopper(u), nil)
		if got, _ := body["status"].(string); got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMoneyTakenBeforeTheDeadlinePaysThoughItsNoticeIsLost: every notice
// is lost and the reconciliation rounds are an hour away, so only the
// expiry's question can tell: an order paid a second before its payBy
// ends paid (its unit stays sold), one never paid expires (its unit
// back).
func TestMoneyTakenBeforeTheDeadlinePaysThoughItsNoticeIsLost(t *testing.T) {
	forEachStack(t, func(c *Config) {
		c.PayWindow, c.PayReconcileAfter, c.PaySandboxDropNotices = 3*time.Second, time.Hour, 1
	}, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(2)
		paid := boughtAndPersisted(t, h, voucher, 1, 1)
		unpaid := boughtAndPersisted(t, h, voucher, 2, 2)
		payment, _ := startPayment(t, h, 1, paid)
		_, body := h.do("GET", "/api/orders/"+paid, h.shopper(1), nil)
		payBy, err := time.Parse(time.RFC3339Nano, body["payBy"].(string))
		if err != nil {
			t.Fatalf("payBy %v: %v", body["payBy"], err)
		}
		time.Sleep(time.Until(payBy.Add(-time.Second)))
		payAt(t, h, payment)
		if got := orderStatus(h, 1, paid, "created", 0); got != "created" {
			t.Fatalf("the notice was lost, yet the order is %s", got)
		}
		if got := orderStatus(h, 2, unpaid, "cancelled", 10*time.Second); got != "cancelled" {
			t.Fatalf("the unpaid order is %s, want cancelled (expired)", got)
		}
		if got := orderStatus(h, 1, paid, "paid", 5*time.Second); got != "paid" {
			t.Fatalf("the order paid a second before its deadline, its notice lost, is %s; want paid", got)
		}
		if _, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["stock"] != 1.0 {
			t.Fatalf("stock %v, want 1: the expired order's unit back, the paid one's sold", v["stock"])
		}
		if word := sandboxSays(t, h, payment); word["status"] != "succeeded" || word["refunded"] != 0.0 {
			t.Fatalf("the sandbox says %v, want the money taken and kept", word)
		}
	})
}

// TestMoneyTakenAfterTheDeadlineIsRefundedByTheReconciliation: the order
// expires unpaid; then the shopper pays at the sandbox anyway (a provider
// may take it late) and the notice is lost: the reconciliation alone
// finds the money, and it goes back (refunded), once.
func TestMoneyTakenAfterTheDeadlineIsRefundedByTheReconciliation(t *testing.T) {
	forEachStack(t, func(c *Config) {
		c.PayWindow, c.PayReconcileAfter, c.PaySandboxDropNotices = 2*time.Second, time.Second, 1
	}, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(2)
		order := boughtAndPersisted(t, h, voucher, 1, 1)
		payment, _ := startPayment(t, h, 1, order)
		if got := orderStatus(h, 1, order, "cancelled", 10*time.Second); got != "cancelled" {
			t.Fatalf("the order is %s, want cancelled (expired)", got)
		}
		payAt(t, h, payment)
		if got := orderStatus(h, 1, order, "refunded", 15*time.Second); got != "refunded" {
			t.Fatalf("money taken after the deadline, its notice lost: the order is %s, want refunded", got)
		}
		word := sandboxSays(t, h, payment)
		if refunds, _ := word["refunds"].([]any); word["status"] != "refunded" || len(refunds) != 1 || word["refunded"] != word["taken"] {
			t.Fatalf("the sandbox says %v, want all it took given back in one refund", word)
		}
		if _, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["stock"] != 2.0 {
			t.Fatalf("stock %v, want 2: the expired order's unit back once", v["stock"])
		}
	})
}

// TestTheSandboxAnswersOnlyTheShopAndRefundsOncePerKey: its status query
// and refund request are the shop's alone (signed with its secret, else
// 401); a refund asked twice with one key, or twice at once, is one
// refund; more than was taken is 409 not_refundable.
func TestTheSandboxAnswersOnlyTheShopAndRefundsOncePerKey(t *testing.T) {
	forEachStack(t, func(c *Config) { c.PaySandboxDropNotices = 1 }, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(1)
		order := boughtAndPersisted(t, h, voucher, 1, 1)
		payment, amount := startPayment(t, h, 1, order)
		path := "/api/payments/sandbox/payments/" + payment
		if status, body, _ := h.request("GET", path, "", nil, http.Header{paysandbox.SignatureHeader: {"sha256=00"}}); status != 401 {
			t.Fatalf("an unsigned status query: %d %v, want 401", status, body)
		}
		if word := sandboxSays(t, h, payment); word["status"] != "pending" || word["amount"] != amount {
			t.Fatalf("before the shopper pays: %v, want pending for %v", word, amount)
		}
		payAt(t, h, payment)
		sandbox := paysandbox.New(paysandbox.Config{Secret: []byte(h.cfg.PaySecret)})
		refund := func(body string) (int, map[string]any) {
			status, out, _ := h.request("POST", path+"/refund", "", body, http.Header{paysandbox.SignatureHeader: {sandbox.Sign([]byte(body))},
				"Content-Type": {"application/json"}})
			return status, out
		}
		if status, out, _ := h.request("POST", path+"/refund", "", `{"key":"k1"}`, http.Header{"Content-Type": {"application/json"}}); status != 401 {
			t.Fatalf("an unsigned refund: %d %v, want 401", status, out)
		}
		if status, out := refund(`{"key":"big","amount":1000000}`); status != 409 || errorCode(out) != "not_refundable" {
			t.Fatalf("a refund of more than was taken: %d %v, want 409 not_refundable", status, out)
		}
		var wg sync.WaitGroup
		statuses := make([]int, 3)
		for i := range statuses {
			wg.Go(func() { statuses[i], _ = refund(`{"key":"k1"}`) })
		}
		wg.Wait()
		word := sandboxSays(t, h, payment)
		if refunds, _ := word["refunds"].([]any); len(refunds) != 1 || word["status"] != "refunded" || word["refunded"] != amount {
			t.Fatalf("three refunds with one key, at once (%v): the sandbox says %v, want one refund of %v", statuses, word, amount)
		}
		if status, out := refund(`{"key":"k2"}`); status != 409 || errorCode(out) != "not_refundable" {
			t.Fatalf("a refund of a payment given back: %d %v, want 409 not_refundable", status, out)
		}
	})
}
