package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestEveryPaymentTakenEndsPaidOrRefunded: a sale of 200 orders paid
// through a sandbox that loses 30 % of its notices and sends 20 % after
// the order's deadline; shoppers pay at any moment up to a second past
// their deadline, and one in ten never does. Once settled, every payment
// the provider took is on a paid order or given back, no order is paid
// without money taken, and Σ taken = Σ paid + Σ refunded.
func TestEveryPaymentTakenEndsPaidOrRefunded(t *testing.T) {
	if testing.Short() {
		t.Skip("a sale of 200 paid orders: skipped in -short mode")
	}
	const orders = 200
	forEachStack(t, func(c *Config) {
		c.PayWindow, c.PayReconcileAfter = 3*time.Second, time.Second
		c.PaySandboxDropNotices, c.PaySandboxDelayNotices = 0.3, 0.2
	}, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(orders)
		tokens := make([]string, orders+1)
		for u := 1; u <= orders; u++ {
			tokens[u] = h.shopper(int64(u))
		}
		var wg sync.WaitGroup
		work := make(chan int)
		for range 16 {
			wg.Go(func() {
				for u := range work {
					payOneOrder(h, voucher, tokens[u])
				}
			})
		}
		for u := 1; u <= orders; u++ {
			work <- u
		}
		close(work)
		wg.Wait()
		var last error
		for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if last = moneyAddsUp(h, voucher); last == nil {
				break
			}
		}
		if last != nil {
			t.Fatal(last)
		}
		report := reconciliation(t, h, voucher)
		if mismatches, _ := report["mismatches"].([]any); len(mismatches) != 0 || report["pending"] == nil {
			t.Fatalf("settled, the report says %v: want no mismatch", report)
		}
		t.Logf("the report: %v", report)
	})
}

// payOneOrder buys and pays (or not) as one shopper does: the payment
// completed at a random moment up to a second past the deadline, or (one
// in ten) never.
func payOneOrder(h *harness, voucher int64, token string) {
	status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", token, nil)
	if status != 200 {
		h.t.Errorf("buy: %d %v", status, body)
		return
	}
	order := body["orderId"].(string)
	bought := time.Now()
	var payment string
	for deadline := time.Now().Add(5 * time.Second); payment == "" && time.Now().Before(deadline); {
		if status, body := h.do("POST", "/api/orders/"+order+"/pay", token, nil); status == 200 {
			payment = body["paymentId"].(string)
		} else {
			time.Sleep(50 * time.Millisecond) // still being recorded
		}
	}
	if payment == "" || rand.IntN(10) == 0 {
		return
	}
	time.Sleep(time.Until(bought.Add(time.Duration(rand.Int64N(int64(h.cfg.PayWindow + time.Second))))))
	h.do("POST", "/api/payments/sandbox/"+payment+"/complete", "", map[string]string{"status": "succeeded"})
}

// moneyAddsUp checks the settled sale against the sandbox's books.
func moneyAddsUp(h *harness, voucher int64) error {
	ctx := context.Background()
	db := h.srv.store.DB()
	var rows []struct {
		Payment  string `bun:"payment"`
		Status   int    `bun:"status"`
		PaidBy   int    `bun:"paid_by"`
		Taken    int64  `bun:"taken"`
		Refunded int64  `bun:"refunded"`
	}
	err := db.NewRaw(`SELECT p.id AS payment, o.status,
		(SELECT COUNT(*) FROM tb_payment_txn AS t WHERE t.payment_id = p.id AND t.result = 'paid') AS paid_by,
		COALESCE((SELECT SUM(c.amount) FROM tb_paysandbox_charge AS c WHERE c.payment_id = p.id), 0) AS taken,
		COALESCE((SELECT SUM(r.amount) FROM tb_paysandbox_refund AS r WHERE r.payment_id = p.id), 0) AS refunded
		FROM tb_payment AS p JOIN tb_voucher_order AS o ON o.id = p.order_id WHERE o.voucher_id = ?`, voucher).Scan(ctx, &rows)
	if err != nil {
		return err
	}
	var taken, paid, refunded int64
	for _, r := range rows {
		taken, refunded = taken+r.Taken, refunded+r.Refunded
		switch {
		case r.PaidBy > 0 && r.Status == 2 && r.Taken == 0:
			return fmt.Errorf("payment %s paid its order, and the provider took nothing", r.Payment)
		case r.PaidBy > 0 && r.Status == 2:
			paid += r.Taken - r.Refunded
		case r.Taken > r.Refunded:
			return fmt.Errorf("payment %s: the provider took %d and gave back %d, its order (status %d) not paid by it", r.Payment, r.Taken, r.Refunded, r.Status)
		}
	}
	if taken != paid+refunded {
		return fmt.Errorf("taken %d ≠ paid %d + refunded %d", taken, paid, refunded)
	}
	h.t.Logf("%d payments: taken %d = paid %d + refunded %d", len(rows), taken, paid, refunded)
	return nil
}
