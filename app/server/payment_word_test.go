package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
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
		report := reconciliation(t, h, voucher)
		if report["payments"] != 1.0 || report["refunded"] != 1.0 || len(report["mismatches"].([]any)) != 0 {
			t.Fatalf("the reconciliation report: %v, want the one payment refunded and nothing amiss", report)
		}

		// A provider's word the shop did not act on: money it said it
		// took on another expired order, recorded and never given back
		// (as if the refund had been lost; the rounds ask no more about a
		// payment recorded succeeded).
		other := boughtAndPersisted(t, h, voucher, 2, 2)
		kept, _ := startPayment(t, h, 2, other)
		if got := orderStatus(h, 2, other, "cancelled", 10*time.Second); got != "cancelled" {
			t.Fatalf("the second order is %s, want cancelled (expired)", got)
		}
		if _, err := h.srv.store.DB().NewUpdate().Table("tb_payment").Set("word = 'succeeded'").Set("state = 'succeeded'").Set("word_taken = amount").
			Where("id = ?", kept).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		report = reconciliation(t, h, voucher)
		mismatches, _ := report["mismatches"].([]any)
		if len(mismatches) != 1 || mismatches[0].(map[string]any)["kind"] != "money_kept" || mismatches[0].(map[string]any)["paymentId"] != kept {
			t.Fatalf("the report %v, want payment %s's money kept", report, kept)
		}
		// The gauge reads the database at most every 5 s.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			got := scrape(t, h, "seckill_payments_unreconciled")
			if got >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("seckill_payments_unreconciled %v, want the mismatch counted", got)
			}
		}
	})
}

func reconciliation(t *testing.T, h *harness, voucher int64) map[string]any {
	t.Helper()
	if status, body := h.do("GET", "/api/admin/payments/reconciliation", "", nil); status != 401 {
		t.Fatalf("the report without the admin token: %d %v, want 401", status, body)
	}
	status, body := h.do("GET", "/api/admin/payments/reconciliation?voucher="+idString(voucher), h.cfg.AdminToken, nil)
	if status != 200 {
		t.Fatalf("the reconciliation report: %d %v", status, body)
	}
	return body
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

// scrape reads one series' value (the first of its name) from /metrics.
func scrape(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(h.metricsText(), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")) {
			fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
			if len(fields) > 0 {
				v, err := strconv.ParseFloat(fields[0], 64)
				if err == nil {
					return v
				}
			}
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// TestMoneyTakenTwiceOnOnePaymentIsGivenBackOnceAndThePaymentStaysPaid: a
// second signed notice of a new transaction on a paid order's payment is
// money taken twice (the sandbox books it); the shop gives that money
// back, and the payment still holds the first: the provider says
// succeeded (taken 200, refunded 100), the shop's record says so too, and
// the reconciliation finds no order paid without money — the history
// checker's settle found one when the record kept the larger of the two
// amounts, not their sum, and the refund read as the whole payment back.
func TestMoneyTakenTwiceOnOnePaymentIsGivenBackOnceAndThePaymentStaysPaid(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(1)
		order, payment := paidOrder(t, h, voucher, 1, 1)
		amount := sandboxSays(t, h, payment)["amount"].(float64)
		if status, body := notify(h, noticeBody(payment, order, amount, "succeeded", "second_"+order), ""); status != 200 || body["result"] != "refunded" {
			t.Fatalf("a second transaction on the paid payment: %d %v, want it refunded", status, body)
		}
		word := sandboxSays(t, h, payment)
		if word["status"] != "succeeded" || word["taken"] != 2*amount || word["refunded"] != amount {
			t.Fatalf("the sandbox says %v; want succeeded, %v taken and %v given back", word, 2*amount, amount)
		}
		report := reconciliation(t, h, voucher)
		if ms, _ := report["mismatches"].([]any); len(ms) != 0 || report["paid"] != 1.0 {
			t.Fatalf("the reconciliation: %v; want the payment paid and no mismatch", report)
		}
		if got := orderStatus(h, 1, order, "paid", 0); got != "paid" {
			t.Fatalf("the order reads %q, want paid", got)
		}
	})
}
