package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/refund"
)

// Refunds is the database's side of an operator's refunds (refund.Store):
// the order's conditional move from paid to refunding is the arbiter, in
// the transaction that records the action and, with the unit, gives it
// back as a cancellation does.
type Refunds struct{ db *bun.DB }

// NewRefunds returns the refunds' store in the store's database.
func NewRefunds(s *Store) *Refunds { return &Refunds{db: s.db} }

// actionRefund is the refunds' kind in the operators' action log.
const actionRefund = "refund"

// Begin implements refund.Store.
func (s *Refunds) Begin(ctx context.Context, r refund.Request, at time.Time) (refund.Begun, error) {
	b := refund.Begun{Request: r}
	reason := core.CancelRefunded
	if !r.ReturnUnit {
		reason = core.CancelRefundedUnitKept
	}
	err := retryConflicts(ctx, func() error {
		return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			res, err := tx.NewUpdate().Table("tb_voucher_order").Set("status = ?", orderStatusRefunding).
				Set("cancel_reason = ?", string(reason)).Set("update_time = ?", at.UTC()).
				Where("id = ?", r.OrderID).Where("status IN (?)", bun.List([]int{orderStatusPaid, orderStatusUsed})).Exec(ctx)
			if err != nil {
				return err
			}
			won, err := res.RowsAffected()
			if err != nil {
				return err
			}
			row, err := findOne[orderRow](ctx, tx, "id", r.OrderID, core.ErrOrderNotFound)
			switch {
			case err != nil:
				return err
			case won == 0 && (row.Status == orderStatusRefunding || row.Status == orderStatusRefunded):
				return refund.ErrUnderWay
			case won == 0:
				return refund.ErrNotPaid
			}
			b.Order = row.order()
			if b.Payment, err = payingPayment(ctx, tx, r.OrderID); err != nil {
				return err
			}
			if r.ReturnUnit {
				if err := giveUnitBack(ctx, tx, row.order(), at); err != nil {
					return err
				}
			}
			return recordRefundAction(ctx, tx, b, at)
		})
	})
	if err != nil {
		return refund.Begun{}, fmt.Errorf("mysqlstore: begin a refund: %w", err) // sentinels survive the wrap
	}
	return b, nil
}

// payingPayment is the payment whose notice paid the order.
func payingPayment(ctx context.Context, tx bun.IDB, orderID int64) (core.Payment, error) {
	var p paymentRow
	err := tx.NewSelect().Model(&p).Where("id = (SELECT t.payment_id FROM tb_payment_txn AS t WHERE t.order_id = ? AND t.result = 'paid' LIMIT 1)", orderID).
		Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Payment{}, refund.ErrNotPaid // paid by no payment the shop recorded: nothing to give back
	}
	if err != nil {
		return core.Payment{}, err
	}
	return core.Payment{ID: p.ID, Provider: p.Provider, OrderID: p.OrderID, Amount: p.Amount}, nil
}

// giveUnitBack is a cancellation's half: the stock column one more and a
// pending release, for the live store.
func giveUnitBack(ctx context.Context, tx bun.Tx, o core.Order, at time.Time) error {
	u, err := tx.NewUpdate().Table("tb_seckill_voucher").Set("stock = stock + 1").Set("update_time = ?", at.UTC()).
		Where("voucher_id = ?", o.VoucherID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("give the unit back: %w", err)
	}
	if n, err := u.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("give the unit back: voucher %d has no stock row (%v)", o.VoucherID, err)
	}
	return recordRelease(ctx, tx, o, at)
}

func recordRefundAction(ctx context.Context, tx bun.Tx, b refund.Begun, at time.Time) error {
	after, _ := json.Marshal(map[string]any{"orderId": fmt.Sprint(b.Order.ID), "status": "refunded", "returnUnit": b.ReturnUnit,
		"paymentId": b.Payment.ID, "amount": b.Payment.Amount})
	_, err := tx.NewInsert().Model(&actionRow{At: at.UTC(), Operator: b.Operator, TokenFingerprint: b.Fingerprint, Action: actionRefund,
		VoucherID: sql.NullInt64{Int64: b.Order.VoucherID, Valid: true}, BeforeState: `{"status":"paid"}`, AfterState: string(after),
		Note: b.Note, State: "done"}).Exec(ctx)
	return err
}

// Finish implements refund.Store.
func (s *Refunds) Finish(ctx context.Context, b refund.Begun, at time.Time) error {
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewUpdate().Table("tb_voucher_order").Set("status = ?", orderStatusRefunded).Set("update_time = ?", at.UTC()).
			Where("id = ?", b.Order.ID).Where("status = ?", orderStatusRefunding).Exec(ctx); err != nil {
			return err
		}
		_, err := tx.NewUpdate().Table("tb_payment").Set("state = ?", string(core.PaymentRefunded)).
			Set("word = ?", string(core.PaymentRefunded)).Set("word_refunded = word_taken").Where("id = ?", b.Payment.ID).Exec(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("mysqlstore: finish a refund: %w", err)
	}
	return nil
}

// Unfinished implements refund.Store.
func (s *Refunds) Unfinished(ctx context.Context, before time.Time, limit int) ([]refund.Begun, error) {
	var rows []orderRow
	if err := s.db.NewSelect().Model(&rows).Where("status = ?", orderStatusRefunding).
		Where("cancel_reason IN (?)", bun.List([]string{string(core.CancelRefunded), string(core.CancelRefundedUnitKept)})).
		Where("update_time < ?", before.UTC()).OrderExpr("update_time").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("mysqlstore: unfinished refunds: %w", err)
	}
	out := make([]refund.Begun, 0, len(rows))
	for _, r := range rows {
		p, err := payingPayment(ctx, s.db, r.ID)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: unfinished refund of order %d: %w", r.ID, err)
		}
		out = append(out, refund.Begun{Request: refund.Request{OrderID: r.ID, ReturnUnit: r.CancelReason.String == string(core.CancelRefunded)},
			Order: r.order(), Payment: p})
	}
	return out, nil
}

// Match implements refund.Store: the paid orders a sweep names.
func (s *Refunds) Match(ctx context.Context, sw refund.Sweep, limit int) ([]int64, error) {
	q := s.db.NewSelect().Table("tb_voucher_order").Column("id").
		Where("status IN (?)", bun.List([]int{orderStatusPaid, orderStatusUsed})).OrderExpr("id").Limit(int64(limit))
	if sw.VoucherID != 0 {
		q = q.Where("voucher_id = ?", sw.VoucherID)
	}
	if len(sw.Users) > 0 {
		q = q.Where("user_id IN (?)", bun.List(sw.Users))
	}
	if len(sw.OrderIDs) > 0 {
		q = q.Where("id IN (?)", bun.List(sw.OrderIDs))
	}
	var ids []int64
	if err := q.Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("mysqlstore: match orders to refund: %w", err)
	}
	return ids, nil
}

var _ refund.Store = (*Refunds)(nil)
