package mysqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/payreconcile"
)

// The reconciliation report (payreconcile.Reports): the shop's record of
// each payment beside the provider's last word on it (tb_payment.word,
// word_taken, word_refunded: its notice, or its answer when asked).

// paidBy is the condition "the payment paid its order".
const paidBy = "EXISTS (SELECT 1 FROM tb_payment_txn AS t WHERE t.payment_id = p.id AND t.result = 'paid')"

// refundOwed is the condition "a refund of the payment is owed".
const refundOwed = "EXISTS (SELECT 1 FROM tb_payment_txn AS t WHERE t.payment_id = p.id AND t.result = 'refunded' AND t.refunded_time IS NULL AND t.create_time < ?)"

// mismatchCases classes a payment's disagreement (the kinds of
// payreconcile), ” when there is none; its one argument is refundOwed's.
var mismatchCases = "CASE WHEN " + refundOwed + " THEN '" + payreconcile.RefundOwed + "'" +
	" WHEN p.word_taken > p.word_refunded AND o.status <> 5 AND NOT " + paidBy + " THEN '" + payreconcile.MoneyKept + "'" +
	" WHEN o.status = 2 AND p.word IN ('pending', 'failed', 'refunded') AND " + paidBy + " THEN '" + payreconcile.PaidWithoutMoney + "'" +
	" ELSE '' END"

// Report implements payreconcile.Reports.
func (s *Payments) Report(ctx context.Context, f payreconcile.Filter) (payreconcile.Report, error) {
	where, args := reportFilter(f)
	var counts []struct {
		State string `bun:"state"`
		N     int    `bun:"n"`
	}
	if err := s.db.NewRaw("SELECT p.state, COUNT(*) AS n FROM tb_payment AS p JOIN tb_voucher_order AS o ON o.id = p.order_id "+
		where+" GROUP BY p.state", args...).Scan(ctx, &counts); err != nil {
		return payreconcile.Report{}, fmt.Errorf("mysqlstore: payments report: %w", err)
	}
	var r payreconcile.Report
	for _, c := range counts {
		r.Payments += c.N
		switch core.PaymentState(c.State) {
		case core.PaymentSucceeded:
			r.Paid += c.N
		case core.PaymentRefunded:
			r.Refunded += c.N
		case core.PaymentFailed:
			r.Failed += c.N
		default:
			r.Pending += c.N
		}
	}
	var err error
	r.Mismatches, err = s.mismatches(ctx, where, args, time.Now().Add(-time.Minute))
	return r, err
}

func (s *Payments) mismatches(ctx context.Context, where string, args []any, owedBefore time.Time) ([]payreconcile.Mismatch, error) {
	var rows []struct {
		Kind         string    `bun:"kind"`
		ID           string    `bun:"id"`
		OrderID      int64     `bun:"order_id"`
		Status       int       `bun:"status"`
		State        string    `bun:"state"`
		Word         string    `bun:"word"`
		WordTaken    int64     `bun:"word_taken"`
		WordRefunded int64     `bun:"word_refunded"`
		CreateTime   time.Time `bun:"create_time"`
	}
	q := "SELECT * FROM (SELECT " + mismatchCases + " AS kind, p.id, p.order_id, o.status, p.state, p.word, p.word_taken, " +
		"p.word_refunded, p.create_time FROM tb_payment AS p JOIN tb_voucher_order AS o ON o.id = p.order_id " + where +
		") AS m WHERE m.kind <> '' ORDER BY m.create_time, m.id LIMIT ?"
	if err := s.db.NewRaw(q, append(append([]any{owedBefore.UTC()}, args...), payreconcile.MaxMismatches)...).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("mysqlstore: payment mismatches: %w", err)
	}
	out := make([]payreconcile.Mismatch, len(rows))
	for i, r := range rows {
		out[i] = payreconcile.Mismatch{Kind: r.Kind, PaymentID: r.ID, OrderID: r.OrderID, OrderStatus: string(orderStatuses[r.Status]),
			State: r.State, Word: r.Word, Taken: r.WordTaken, Refunded: r.WordRefunded, At: r.CreateTime.UTC()}
	}
	return out, nil
}

func reportFilter(f payreconcile.Filter) (string, []any) {
	var conds []string
	var args []any
	if f.VoucherID != 0 {
		conds, args = append(conds, "o.voucher_id = ?"), append(args, f.VoucherID)
	}
	if !f.Since.IsZero() {
		conds, args = append(conds, "p.create_time >= ?"), append(args, f.Since.UTC())
	}
	if len(conds) == 0 {
		return "", nil
	}
	return "WHERE " + strings.Join(conds, " AND "), args
}

// Unreconciled implements payreconcile.Reports.
func (s *Payments) Unreconciled(ctx context.Context, now time.Time, after time.Duration) (int, error) {
	var behind int
	if err := s.db.NewRaw("SELECT COUNT(*) FROM tb_payment AS p WHERE p.state IN (?, ?) AND p.create_time < ? AND p.create_time >= ? "+
		"AND (p.checked_time IS NULL OR p.checked_time < ?)", string(core.PaymentPending), string(core.PaymentFailed),
		now.Add(-after).UTC(), now.Add(-payreconcile.DefaultHorizon).UTC(), now.Add(-2*after).UTC()).Scan(ctx, &behind); err != nil {
		return 0, fmt.Errorf("mysqlstore: unreconciled payments: %w", err)
	}
	var mismatched int
	if err := s.db.NewRaw("SELECT COUNT(*) FROM (SELECT "+mismatchCases+" AS kind FROM tb_payment AS p "+
		"JOIN tb_voucher_order AS o ON o.id = p.order_id WHERE p.create_time >= ?) AS m WHERE m.kind <> ''",
		now.Add(-time.Minute).UTC(), now.Add(-payreconcile.DefaultHorizon).UTC()).Scan(ctx, &mismatched); err != nil {
		return 0, fmt.Errorf("mysqlstore: unreconciled payments: %w", err)
	}
	return behind + mismatched, nil
}

var _ payreconcile.Reports = (*Payments)(nil)
