package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill-lab/seckill/adapters/paysandbox"
	"github.com/seckill-lab/seckill/adapters/testenv"
)

// boughtAndPersisted buys one unit of voucher for shopper u and waits for
// its row: the order id.
func boughtAndPersisted(t *testing.T, h *harness, voucher, u int64, rows int) string {
	t.Helper()
	status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
	if status != 200 {
		t.Fatalf("buy: %d %v", status, body)
	}
	if n := h.waitForRows(voucher, rows, 10*time.Second); n < rows {
		t.Fatalf("%d rows, want %d", n, rows)
	}
	return body["orderId"].(string)
}

// startPayment is the shopper's /pay: the payment id and amount.
func startPayment(t *testing.T, h *harness, u int64, order string) (string, float64) {
	t.Helper()
	status, body := h.do("POST", "/api/orders/"+order+"/pay", h.shopper(u), nil)
	if status != 200 || body["payUrl"] != paysandbox.PagePath+body["paymentId"].(string) {
		t.Fatalf("pay: %d %v, want a payment and the sandbox's page", status, body)
	}
	return body["paymentId"].(string), body["amount"].(float64)
}

// notify sends a sandbox notification as the provider would: signed with
// the sandbox's secret, unless sig is given.
func notify(h *harness, body []byte, sig string) (int, map[string]any) {
	if sig == "" {
		sig = paysandbox.New(paysandbox.Config{Secret: []byte(h.cfg.PaySecret)}).Sign(body)
	}
	status, out, _ := h.request("POST", "/api/payments/sandbox/notify", "", string(body), http.Header{"X-Seckill-Signature": {sig}})
	return status, out
}

func noticeBody(payment, order string, amount float64, status, txn string) []byte {
	b, _ := json.Marshal(map[string]any{"paymentId": payment, "orderId": order, "amount": amount, "status": status, "txnId": txn})
	return b
}

// TestAShopperPaysThroughTheSandbox: /pay answers the sandbox's page for
// the voucher's payValue; the page's Pay makes the signed notification and
// the order is paid: then it can be neither cancelled nor paid again, and
// it never expires.
func TestAShopperPaysThroughTheSandbox(t *testing.T) {
	for _, queue := range []string{"streamgroup", "sync"} {
		t.Run(queue, func(t *testing.T) {
			forEachStack(t, func(c *Config) { c.Queue = queue }, func(t *testing.T, h *harness) {
				voucher := h.openVoucher(2)
				order := boughtAndPersisted(t, h, voucher, 1, 1)
				payment, amount := startPayment(t, h, 1, order)
				if amount != 100 {
					t.Fatalf("amount %v, want the voucher's payValue, 100", amount)
				}
				if status, body := h.do("POST", "/api/orders/"+order+"/pay", h.shopper(2), nil); status != 404 {
					t.Fatalf("another shopper pays it: %d %v, want 404", status, body)
				}
				resp, err := h.client.Get(h.base + paysandbox.PagePath + payment)
				if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") == "" {
					t.Fatalf("the pay page: %v %v", resp, err)
				}
				resp.Body.Close()
				if status, body := h.do("GET", "/api/payments/sandbox/"+payment, "", nil); status != 200 || body["orderId"] != order || body["amount"] != float64(100) ||
					body["orderStatus"] != "created" || body["title"] != "test voucher" {
					t.Fatalf("the page's payment: %d %v, want the order, its amount, status and item", status, body)
				}
				if status, body := h.do("POST", "/api/payments/sandbox/"+payment+"/complete", "", map[string]string{"status": "failed"}); status != 200 || body["result"] != "failed" {
					t.Fatalf("a failed payment: %d %v", status, body)
				}
				if _, body := h.do("GET", "/api/orders/"+order, h.shopper(1), nil); body["status"] != "created" {
					t.Fatalf("after a failed payment: %v, want still created", body)
				}
				if status, body := h.do("POST", "/api/payments/sandbox/"+payment+"/complete", "", map[string]string{"status": "succeeded"}); status != 200 || body["result"] != "paid" {
					t.Fatalf("pay: %d %v", status, body)
				}
				if _, body := h.do("GET", "/api/orders/"+order, h.shopper(1), nil); body["status"] != "paid" || body["payBy"] != nil {
					t.Fatalf("after paying: %v, want paid", body)
				}
				// The outside review paid the paid order again from its page:
				// the second transaction was refunded. Now the page says it
				// is paid, and a second payment is refused before any money
				// moves.
				if status, body := h.do("GET", "/api/payments/sandbox/"+payment, "", nil); status != 200 || body["orderStatus"] != "paid" {
					t.Fatalf("the page of a paid order's payment: %d %v, want it shown paid", status, body)
				}
				if status, body := h.do("POST", "/api/payments/sandbox/"+payment+"/complete", "", map[string]string{"status": "succeeded"}); status != 409 || errorCode(body) != "not_payable" {
					t.Fatalf("paying a paid order again: %d %v, want 409 not_payable", status, body)
				}
				var txns int
				if err := h.srv.store.DB().NewSelect().TableExpr("tb_payment_txn").ColumnExpr("COUNT(*)").Where("order_id = ?", order).Scan(context.Background(), &txns); err != nil {
					t.Fatal(err)
				}
				if _, body := h.do("GET", "/api/orders/"+order, h.shopper(1), nil); body["status"] != "paid" || txns != 2 {
					t.Fatalf("after a second payment was refused: %v with %d transactions, want paid, the failed and the paid one", body, txns)
				}
				if status, body := h.do("POST", "/api/orders/"+order+"/cancel", h.shopper(1), nil); status != 409 || errorCode(body) != "not_cancellable" {
					t.Fatalf("cancel a paid order: %d %v", status, body)
				}
				if status, body := h.do("POST", "/api/orders/"+order+"/pay", h.shopper(1), nil); status != 409 || errorCode(body) != "not_payable" {
					t.Fatalf("pay a paid order: %d %v", status, body)
				}
				if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 409 || errorCode(body) != "already_purchased" {
					t.Fatalf("the payer buys again: %d %v, want already_purchased", status, body)
				}
			})
		})
	}
}

// TestPaymentNotificationsAreVerifiedAndRecordedOnce: a bad signature is
// 401, a body that does not parse 400, another amount 400, a payment the
// shop does not know 503 (the provider retries); a replay of a recorded
// transaction is answered 200 already_recorded and changes nothing; and a
// payment arriving after the order was cancelled refunds it, the unit
// staying on sale.
func TestPaymentNotificationsAreVerifiedAndRecordedOnce(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(2)
		order := boughtAndPersisted(t, h, voucher, 1, 1)
		payment, amount := startPayment(t, h, 1, order)
		good := noticeBody(payment, order, amount, "succeeded", "txn-1")
		if status, body := notify(h, good, "sha256=00"); status != 401 || errorCode(body) != "bad_signature" {
			t.Fatalf("bad signature: %d %v, want 401 bad_signature", status, body)
		}
		for name, b := range map[string][]byte{
			"not JSON":      []byte("status=succeeded"),
			"extra field":   []byte(`{"paymentId":"` + payment + `","orderId":"` + order + `","amount":100,"status":"succeeded","txnId":"t","x":1}`),
			"bad status":    noticeBody(payment, order, amount, "ok", "txn-x"),
			"no txn":        noticeBody(payment, order, amount, "succeeded", ""),
			"another order": noticeBody(payment, "12345", amount, "succeeded", "txn-y"),
			"another sum":   noticeBody(payment, order, amount+1, "succeeded", "txn-z"),
		} {
			if status, body := notify(h, b, ""); status != 400 {
				t.Errorf("%s: %d %v, want 400", name, status, body)
			}
		}
		if status, body := notify(h, noticeBody("ffff", order, amount, "succeeded", "txn-u"), ""); status != 503 {
			t.Fatalf("an unknown payment: %d %v, want 503 so the provider retries", status, body)
		}
		if status, body := notify(h, good, ""); status != 200 || body["result"] != "paid" {
			t.Fatalf("the payment: %d %v", status, body)
		}
		if status, body := notify(h, good, ""); status != 200 || body["result"] != "already_recorded" {
			t.Fatalf("its replay: %d %v, want 200 already_recorded", status, body)
		}
		if _, body := h.do("GET", "/api/orders/"+order, h.shopper(1), nil); body["status"] != "paid" {
			t.Fatalf("after the replay: %v", body)
		}

		// A late payment: the order is cancelled first.
		late := boughtAndPersisted(t, h, voucher, 2, 2)
		payment2, amount2 := startPayment(t, h, 2, late)
		if status, body := h.do("POST", "/api/orders/"+late+"/cancel", h.shopper(2), nil); status != 200 {
			t.Fatalf("cancel: %d %v", status, body)
		}
		if status, body := notify(h, noticeBody(payment2, late, amount2, "succeeded", "txn-2"), ""); status != 200 || body["result"] != "refunded" {
			t.Fatalf("a payment after the cancel: %d %v, want refunded", status, body)
		}
		if _, body := h.do("GET", "/api/orders/"+late, h.shopper(2), nil); body["status"] != "refunded" {
			t.Fatalf("the late-paid order: %v, want refunded", body)
		}
		if _, body := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); body["stock"] != float64(1) {
			t.Fatalf("stock %v, want 1: the refunded order's unit stays on sale", body["stock"])
		}
		if status, body := notify(h, noticeBody(payment2, late, amount2, "succeeded", "txn-2"), ""); status != 200 || body["result"] != "already_recorded" {
			t.Fatalf("the late payment's replay: %d %v", status, body)
		}
		_, dash := h.do("GET", "/api/dashboard", h.cfg.AdminToken, nil)
		if o, _ := dash["orders"].(map[string]any); o["paid"] != float64(1) || o["refunded"] != float64(1) || o["unpaid"] != float64(0) {
			t.Fatalf("the dashboard's orders: %v, want one paid and one refunded", dash["orders"])
		}
	})
}

// TestPaymentsRaceTheExpiry: 200 orders with a pay window of a second, each
// paid by a notification sent around its deadline, while the instances'
// sweeps expire what is due (two instances on the real stack). Every
// order ends paid, cancelled (expired) or refunded (paid too late); the
// database's stock is the initial stock less the paid orders; once the
// sweeps are done, Redis's stock equals it; and the units given back are
// exactly the cancelled orders.
func TestPaymentsRaceTheExpiry(t *testing.T) {
	forEachStack(t, func(c *Config) { c.PayWindow = time.Second }, func(t *testing.T, h *harness) {
		const n = 200
		instances, voucher, orders := raceSale(t, h, n)
		payments := make([]string, n+1)
		for u := int64(1); u <= n; u++ {
			// Some are no longer payable by now: expired already.
			if status, body := h.do("POST", "/api/orders/"+orders[u]+"/pay", h.shopper(u), nil); status == 200 {
				payments[u] = body["paymentId"].(string)
			}
		}
		results := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for u := int64(1); u <= n; u++ {
			if payments[u] == "" {
				continue
			}
			wg.Go(func() {
				time.Sleep(time.Duration(u%50) * 40 * time.Millisecond)
				inst := instances[u%int64(len(instances))]
				status, body := notify(inst, noticeBody(payments[u], orders[u], 100, "succeeded", "race-"+strconv.FormatInt(u, 10)), "")
				mu.Lock()
				defer mu.Unlock()
				if status != 200 {
					t.Errorf("notification %d: %d %v", u, status, body)
					return
				}
				results[body["result"].(string)]++
			})
		}
		wg.Wait()
		ctx := context.Background()
		db := h.srv.store.DB()
		deadline := time.Now().Add(10 * time.Second)
		var unpaid, pending int64
		for time.Now().Before(deadline) {
			unpaid, _ = db.NewSelect().Table("tb_voucher_order").Where("voucher_id = ? AND status = 1", voucher).Count(ctx)
			pending, _ = db.NewSelect().Table("tb_order_release").Where("voucher_id = ?", voucher).Count(ctx)
			if unpaid == 0 && pending == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		byStatus := map[int]int{}
		var rows []struct {
			Status int `bun:"status"`
			N      int `bun:"n"`
		}
		if err := db.NewSelect().Table("tb_voucher_order").ColumnExpr("status, COUNT(*) AS n").Where("voucher_id = ?", voucher).
			GroupExpr("status").Scan(ctx, &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			byStatus[r.Status] = r.N
		}
		paid, cancelled, refunded := byStatus[2], byStatus[4], byStatus[5]+byStatus[6]
		if paid+cancelled+refunded != n || byStatus[1] != 0 {
			t.Fatalf("orders by status %v: want every one paid, cancelled or refunded", byStatus)
		}
		if paid != results["paid"] || refunded != results["refunded"] {
			t.Fatalf("%d paid and %d refunded orders, but the notifications said %v", paid, refunded, results)
		}
		_, stock := h.rows(voucher)
		if stock != int64(n-paid) {
			t.Fatalf("database stock %d, want %d (initial less the paid)", stock, n-paid)
		}
		if _, body := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); body["stock"] != float64(stock) {
			t.Fatalf("Redis stock %v, want the database's %d", body["stock"], stock)
		}
		var returned, cancels float64
		for _, inst := range instances {
			returned += testutil.ToFloat64(inst.srv.metrics.unitsReturned)
			cancels += testutil.ToFloat64(inst.srv.metrics.cancelled.WithLabelValues("expired"))
		}
		if int(cancels) != cancelled+refunded || int(returned) != cancelled+refunded {
			t.Fatalf("%v cancellations counted and %v units returned, want %d each (cancelled and later refunded orders)", cancels, returned, cancelled+refunded)
		}
		t.Logf("%d paid, %d expired, %d paid too late and refunded", paid, cancelled, refunded)
	})
}

// TestThePaymentProviderIsChosenAsTheContractSays: the sandbox with a
// random secret on the stand-ins; no payments on real servers unless one
// is chosen; the sandbox there needs a secret of its own, not an example
// and not short; an unknown provider stops the start naming the variable.
func TestThePaymentProviderIsChosenAsTheContractSays(t *testing.T) {
	real := map[string]string{"SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0", "SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x",
		"SECKILL_JWT_SECRET": testenv.Secret(), "SECKILL_ADMIN_TOKEN": testenv.Secret()}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range real {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	c, err := LoadConfig(env(nil))
	if err != nil || c.PayProvider != SandboxProvider || len(c.PaySecret) < 32 || c.PaySandboxOnRealServers {
		t.Fatalf("stand-ins: provider %q, secret of %d bytes, %v", c.PayProvider, len(c.PaySecret), err)
	}
	if c, err := LoadConfig(env(real)); err != nil || c.PayProvider != "" {
		t.Fatalf("real servers, nothing chosen: provider %q, %v; want none", c.PayProvider, err)
	}
	for name, tc := range map[string]struct {
		extra map[string]string
		want  string
	}{
		"sandbox without a secret": {map[string]string{"SECKILL_PAY_PROVIDER": "sandbox"}, "SECKILL_PAY_SECRET"},
		"a short secret":           {map[string]string{"SECKILL_PAY_PROVIDER": "sandbox", "SECKILL_PAY_SECRET": "short"}, "SECKILL_PAY_SECRET"},
		"an unknown provider":      {map[string]string{"SECKILL_PAY_PROVIDER": "paypal"}, "SECKILL_PAY_PROVIDER"},
	} {
		if _, err := LoadConfig(env(with(tc.extra))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal naming %s", name, err, tc.want)
		}
	}
	c, err = LoadConfig(env(with(map[string]string{"SECKILL_PAY_PROVIDER": "sandbox", "SECKILL_PAY_SECRET": "a-real-pay-secret-0123456789"})))
	if err != nil || !c.PaySandboxOnRealServers {
		t.Fatalf("the sandbox chosen on real servers: %v, warned %v; want it allowed and warned of", err, c.PaySandboxOnRealServers)
	}
}

// TestWithoutAProviderOrdersCannotBePaid: /pay answers 409
// payments_disabled, and the sandbox's page is not served.
func TestWithoutAProviderOrdersCannotBePaid(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) { c.PayProvider = "" })
	voucher := h.openVoucher(1)
	order := boughtAndPersisted(t, h, voucher, 1, 1)
	if status, body := h.do("POST", "/api/orders/"+order+"/pay", h.shopper(1), nil); status != 409 || errorCode(body) != "payments_disabled" {
		t.Fatalf("pay without a provider: %d %v, want 409 payments_disabled", status, body)
	}
	if status, _ := h.do("GET", "/pay/sandbox/abc", "", nil); status != 404 {
		t.Fatalf("the sandbox's page without the sandbox: %d, want 404", status)
	}
}

// TestASignedNotificationOfTheWrongShapeIsToldInTheProvidersTerms: the
// outside review got "…Go struct field Notice.amount of type int64" back;
// the answer names the field and what it wants.
func TestASignedNotificationOfTheWrongShapeIsToldInTheProvidersTerms(t *testing.T) {
	h := startServer(t, "embedded", nil)
	body := []byte(`{"paymentId":"p1","orderId":"1","amount":"99","status":"succeeded","txnId":"t1"}`)
	status, out := notify(h, body, "")
	e, _ := out["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if status != 400 || errorCode(out) != "bad_request" || !strings.Contains(msg, `field "amount": want an integer`) {
		t.Fatalf("amount as a string: %d %v, want 400 bad_request naming the field and what it wants", status, out)
	}
	for _, leak := range []string{"Go ", "struct", "int64", "Notice", "json:"} {
		if strings.Contains(msg, leak) {
			t.Errorf("the answer %q names %q", msg, leak)
		}
	}
}
