package server

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

// BenchmarkRefundSweep10k: 10,000 paid orders of one voucher (written
// straight into the database with their payments and the sandbox's
// charges, then the voucher reconciled so Redis holds their buyers) are
// refunded with their units by one sweep (POST /api/admin/orders/refund).
// It reports the sweep's seconds (sweep-s) and the seconds until every
// unit is back in both stores (units-back-s), and fails unless each order
// is refunded once at the sandbox and the stock is back to 10,000 in
// MySQL and Redis, no unit twice. On the real servers when
// SECKILL_TEST_REDIS_URL and SECKILL_TEST_MYSQL_DSN are set, else on the
// stand-ins, which the log says. Run: go test ./app/server -run '^$'
// -bench RefundSweep10k -benchtime 1x.
func BenchmarkRefundSweep10k(b *testing.B) {
	const n = 10_000
	for range b.N {
		b.StopTimer()
		stack := "real"
		if !realStackConfigured() {
			stack = "embedded"
			b.Log("on the stand-ins (miniredis, SQLite): the real servers are not configured")
		}
		h := startServer(b, stack, nil)
		voucher := h.openVoucher(n)
		paidOrdersInBulk(b, h, voucher, n)
		if status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/reconcile", h.cfg.AdminToken, nil); status != 200 {
			b.Fatalf("reconcile: %d %v", status, body)
		}
		if _, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["stock"] != 0.0 {
			b.Fatalf("before the sweep: stock %v, want 0", v["stock"])
		}
		b.StartTimer()
		start := time.Now()
		refunded, calls := 0.0, 0
		for more := true; more; calls++ {
			status, body := h.do("POST", "/api/admin/orders/refund", h.cfg.AdminToken, map[string]any{"voucher": idString(voucher), "returnUnit": true})
			if status != 200 || body["failed"] != 0.0 {
				b.Fatalf("the sweep: %d %v", status, body)
			}
			refunded += body["refunded"].(float64)
			more = body["more"] != 0.0
		}
		swept := time.Since(start)
		b.StopTimer()
		if refunded != n {
			b.Fatalf("the sweep refunded %v in %d calls, want %d", refunded, calls, n)
		}
		b.Logf("%d orders refunded in %d calls (each begins none past 4 s)", n, calls)
		back := unitsBack(b, h, voucher, n, start)
		b.ReportMetric(swept.Seconds(), "sweep-s")
		b.ReportMetric(back.Seconds(), "units-back-s")
		var refunds, done int
		db := h.srv.store.DB()
		if err := db.NewRaw("SELECT COUNT(*) FROM tb_paysandbox_refund AS r JOIN tb_payment AS p ON p.id = r.payment_id "+
			"JOIN tb_voucher_order AS o ON o.id = p.order_id WHERE o.voucher_id = ?", voucher).Scan(context.Background(), &refunds); err != nil {
			b.Fatal(err)
		}
		if err := db.NewRaw("SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ? AND status = 6", voucher).Scan(context.Background(), &done); err != nil {
			b.Fatal(err)
		}
		if refunds != n || done != n {
			b.Fatalf("%d refunds at the sandbox, %d orders refunded; want %d each", refunds, done, n)
		}
	}
}

// realStackConfigured: the real servers' variables are set.
func realStackConfigured() bool {
	return os.Getenv(testenv.RedisURLEnv) != "" && os.Getenv(testenv.MySQLDSNEnv) != ""
}

// unitsBack waits until the voucher's stock is want in MySQL and Redis
// (and stays no higher), and says how long after start.
func unitsBack(b *testing.B, h *harness, voucher int64, want int64, start time.Time) time.Duration {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, column := h.rows(voucher)
		_, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil)
		live, _ := v["stock"].(float64)
		if int64(column) > want || int64(live) > want {
			b.Fatalf("stock column %d, Redis %v: more than the %d units: one came back twice", column, live, want)
		}
		if int64(column) == want && int64(live) == want {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			b.Fatalf("stock column %d, Redis %v two minutes on; want %d", column, live, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// paidOrdersInBulk writes n paid orders of voucher (users 1..n, order ids
// voucher<<32 + 1..n: as issued in the epoch's first seconds, below any
// the ID worker issues today), each with its payment, the
// transaction that paid it and the sandbox's charge, and takes their units
// off the stock column.
func paidOrdersInBulk(b *testing.B, h *harness, voucher int64, n int) {
	ctx := context.Background()
	db := h.srv.store.DB()
	now := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	const chunk = 1000
	for from := 1; from <= n; from += chunk {
		var orders, payments, txns, books, charges []string
		for i := from; i < from+chunk && i <= n; i++ {
			pid := fmt.Sprintf("%024x", voucher<<32|int64(i))
			orders = append(orders, fmt.Sprintf("(%d, %d, %d, 2, '%s', '%s')", voucher<<32|int64(i), i, voucher, now, now))
			payments = append(payments, fmt.Sprintf("('%s', %d, 'sandbox', 100, 'succeeded', 'succeeded', 100, '%s')", pid, voucher<<32|int64(i), now))
			txns = append(txns, fmt.Sprintf("('sandbox', 'bulk_%s', '%s', %d, 100, 1, 'paid', '%s')", pid, pid, voucher<<32|int64(i), now))
			books = append(books, fmt.Sprintf("('%s', %d, 100, '%s')", pid, voucher<<32|int64(i), now))
			charges = append(charges, fmt.Sprintf("('bulk_%s', '%s', 100, '%s')", pid, pid, now))
		}
		for _, q := range []string{
			"INSERT INTO tb_voucher_order (id, user_id, voucher_id, status, create_time, update_time) VALUES " + strings.Join(orders, ","),
			"INSERT INTO tb_payment (id, order_id, provider, amount, state, word, word_taken, create_time) VALUES " + strings.Join(payments, ","),
			"INSERT INTO tb_payment_txn (provider, txn_id, payment_id, order_id, amount, succeeded, result, create_time) VALUES " + strings.Join(txns, ","),
			"INSERT INTO tb_paysandbox_payment (id, order_id, amount, create_time) VALUES " + strings.Join(books, ","),
			"INSERT INTO tb_paysandbox_charge (txn_id, payment_id, amount, create_time) VALUES " + strings.Join(charges, ","),
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := db.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = stock - ? WHERE voucher_id = ?", n, voucher); err != nil {
		b.Fatal(err)
	}
}
