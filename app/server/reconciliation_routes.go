package server

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/payreconcile"
)

// reconciliationRoutes are the operator's reconciliation report: the
// shop's record of the payments beside the provider's word.
type reconciliationRoutes struct {
	reports payreconcile.Reports
}

func (a *reconciliationRoutes) mount(app *fiber.App, e *api) {
	app.Get("/api/admin/payments/reconciliation", e.adminGate.require, a.reconciliation)
}

// reconciliation is ?voucher=&since=.
func (a *reconciliationRoutes) reconciliation(c *fiber.Ctx) error {
	var f payreconcile.Filter
	var err error
	if f.VoucherID, f.Since, err = voucherAndSince(c); err != nil {
		return err
	}
	r, err := a.reports.Report(c.UserContext(), f)
	if err != nil {
		return core.Wrap("payments: reconciliation report", core.CodeUnavailable, err)
	}
	return c.JSON(reconciliationJSON(r))
}

func reconciliationJSON(r payreconcile.Report) fiber.Map {
	mismatches := make([]fiber.Map, len(r.Mismatches))
	for i, m := range r.Mismatches {
		mismatches[i] = fiber.Map{"kind": m.Kind, "paymentId": m.PaymentID, "orderId": strconv.FormatInt(m.OrderID, 10),
			"orderStatus": m.OrderStatus, "state": m.State, "providerSays": m.Word, "taken": m.Taken, "refunded": m.Refunded,
			"startedAt": m.At.Format(time.RFC3339Nano)}
	}
	return fiber.Map{"payments": r.Payments, "paid": r.Paid, "refunded": r.Refunded, "pending": r.Pending, "failed": r.Failed,
		"mismatches": mismatches}
}

// unreconciledCollector is seckill_payments_unreconciled: the payments
// still unsettled past the threshold (unasked within twice
// SECKILL_PAY_RECONCILE_AFTER) and the mismatches, read from the database
// at most every 5 s however often it is gathered.
type unreconciledCollector struct {
	reports payreconcile.Reports
	after   time.Duration
	desc    *prometheus.Desc

	mu    sync.Mutex
	at    time.Time
	count float64
}

func newUnreconciledCollector(queue string, reports payreconcile.Reports, after time.Duration) *unreconciledCollector {
	return &unreconciledCollector{reports: reports, after: after, desc: prometheus.NewDesc("seckill_payments_unreconciled",
		"Payments still unsettled past the threshold: the provider not asked about them within twice SECKILL_PAY_RECONCILE_AFTER, or its word and the shop's record disagree (GET /api/admin/payments/reconciliation lists them).",
		nil, prometheus.Labels{"queue": queue})}
}

func (c *unreconciledCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *unreconciledCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) >= 5*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, err := c.reports.Unreconciled(ctx, time.Now(), c.after)
		cancel()
		if err == nil { // a failed read keeps the last count
			c.at, c.count = time.Now(), float64(n)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, c.count)
}
