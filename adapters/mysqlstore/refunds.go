package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/refund"
)

// Refunds is the database's side of an operator's refunds (refund.Store):
// the orders' conditional move from paid to refunding is the arbiter, in
// the transaction that records the actions and, with the units, gives
// them back as a cancellation does.
type Refunds struct {
	db *bun.DB
	// lockingReads: MySQL reads the rows a batch begins with FOR UPDATE
	// (SQLite, one writer at a time, needs none).
	lockingReads bool
}

// NewRefunds returns the refunds' store in the store's database.
func NewRefunds(s *Store) *Refunds {
	return &Refunds{db: s.db, lockingReads: s.dialect == dialectMySQL}
}

// actionRefund is the refunds' kind in the operators' action log.
const actionRefund = "refund"

// Begin implements refund.Store: the paid orders among ids, locked in id
// order (two batches never wait on each other in a circle), move to
// refunding with their actions, and with the units every voucher's stock
// column moves once by its count, last (the row every refund and every
// purchase of the voucher waits on is held for the shortest time).
func (s *Refunds) Begin(ctx context.Context, r refund.Request, ids []int64, at time.Time) (refund.Batch, error) {
	var out refund.Batch
	err := retryConflicts(ctx, func() error {
		out = refund.Batch{Left: make(map[int64]error)}
		return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			rows, err := s.lockPaid(ctx, tx, ids)
			if err != nil {
				return err
			}
			paying, err := payingPayments(ctx, tx, rowIDs(rows))
			if err != nil {
				return err
			}
			for _, row := range rows {
				p, ok := paying[row.ID]
				if !ok {
					// Paid by no payment the shop recorded: no money to give back.
					out.Left[row.ID] = refund.ErrNotPaid
					continue
				}
				out.Begun = append(out.Begun, refund.Begun{Request: withOrder(r, row.ID), Order: row.order(), Payment: p})
			}
			if err := s.why(ctx, tx, ids, out); err != nil {
				return err
			}
			if len(out.Begun) == 0 {
				return nil
			}
			return beginRefunds(ctx, tx, r, out.Begun, at)
		})
	})
	if err != nil {
		return refund.Batch{}, fmt.Errorf("mysqlstore: begin refunds: %w", err)
	}
	return out, nil
}

func withOrder(r refund.Request, id int64) refund.Request {
	r.OrderID = id
	return r
}

func rowIDs(rows []orderRow) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// lockPaid reads the paid (or used) orders among ids, locked.
func (s *Refunds) lockPaid(ctx context.Context, tx bun.Tx, ids []int64) ([]orderRow, error) {
	var rows []orderRow
	q := tx.NewSelect().Model(&rows).Where("id IN (?)", bun.List(ids)).
		Where("status IN (?)", bun.List([]int{orderStatusPaid, orderStatusUsed})).OrderExpr("id")
	if s.lockingReads {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		return nil, err
	}
	return rows, nil
}

// why says of each of ids not begun why: refunding or refunded already,
// not paid, or no such order.
func (s *Refunds) why(ctx context.Context, tx bun.Tx, ids []int64, b refund.Batch) error {
	begun := make(map[int64]bool, len(b.Begun))
	for _, x := range b.Begun {
		begun[x.Order.ID] = true
	}
	var rest []int64
	for _, id := range ids {
		if _, left := b.Left[id]; !left && !begun[id] {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	var rows []orderRow
	if err := tx.NewSelect().Model(&rows).Column("id", "status").Where("id IN (?)", bun.List(rest)).Scan(ctx); err != nil {
		return err
	}
	status := make(map[int64]int, len(rows))
	for _, r := range rows {
		status[r.ID] = r.Status
	}
	for _, id := range rest {
		st, found := status[id]
		switch {
		case !found:
			b.Left[id] = core.ErrOrderNotFound
		case st == orderStatusRefunding || st == orderStatusRefunded:
			b.Left[id] = refund.ErrUnderWay
		default:
			b.Left[id] = refund.ErrNotPaid
		}
	}
	return nil
}

// beginRefunds moves the begun orders to refunding, records their actions
// and, with the units, gives them back.
func beginRefunds(ctx context.Context, tx bun.Tx, r refund.Request, begun []refund.Begun, at time.Time) error {
	reason := core.CancelRefunded
	if !r.ReturnUnit {
		reason = core.CancelRefundedUnitKept
	}
	ids := make([]int64, len(begun))
	for i, b := range begun {
		ids[i] = b.Order.ID
	}
	res, err := tx.NewUpdate().Table("tb_voucher_order").Set("status = ?", orderStatusRefunding).
		Set("cancel_reason = ?", string(reason)).Set("update_time = ?", at.UTC()).
		Where("id IN (?)", bun.List(ids)).Where("status IN (?)", bun.List([]int{orderStatusPaid, orderStatusUsed})).Exec(ctx)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(ids)) {
		// Read paid under the transaction's lock, and not paid now: never
		// on MySQL or SQLite; if ever, nothing of it is kept.
		return fmt.Errorf("began %d of the %d refunds read paid (%v)", n, len(ids), err)
	}
	if err := recordRefundActions(ctx, tx, begun, at); err != nil {
		return err
	}
	if !r.ReturnUnit {
		return nil
	}
	return giveUnitsBack(ctx, tx, begun, at)
}

// payingPayments are the payments whose notices paid the orders.
func payingPayments(ctx context.Context, db bun.IDB, orderIDs []int64) (map[int64]core.Payment, error) {
	out := make(map[int64]core.Payment, len(orderIDs))
	if len(orderIDs) == 0 {
		return out, nil
	}
	var rows []paymentRow
	if err := db.NewSelect().Model(&rows).
		Where("id IN (SELECT t.payment_id FROM tb_payment_txn AS t WHERE t.order_id IN (?) AND t.result = 'paid')", bun.List(orderIDs)).
		Scan(ctx); err != nil {
		return nil, err
	}
	for _, p := range rows {
		out[p.OrderID] = core.Payment{ID: p.ID, Provider: p.Provider, OrderID: p.OrderID, Amount: p.Amount}
	}
	return out, nil
}

// giveUnitsBack is a cancellation's half for each begun refund: pending
// releases for the live store, and each voucher's stock column more by
// its count, in voucher order.
func giveUnitsBack(ctx context.Context, tx bun.Tx, begun []refund.Begun, at time.Time) error {
	releases := make([]releaseRow, len(begun))
	units := make(map[int64]int)
	for i, b := range begun {
		releases[i] = releaseRow{OrderID: b.Order.ID, VoucherID: b.Order.VoucherID, UserID: b.Order.UserID, CreateTime: at.UTC()}
		units[b.Order.VoucherID]++
	}
	if _, err := tx.NewInsert().Model(&releases).Exec(ctx); err != nil {
		return fmt.Errorf("record the releases: %w", err)
	}
	vouchers := make([]int64, 0, len(units))
	for v := range units {
		vouchers = append(vouchers, v)
	}
	slices.Sort(vouchers)
	for _, v := range vouchers {
		u, err := tx.NewUpdate().Table("tb_seckill_voucher").Set("stock = stock + ?", units[v]).Set("update_time = ?", at.UTC()).
			Where("voucher_id = ?", v).Exec(ctx)
		if err != nil {
			return fmt.Errorf("give the units back: %w", err)
		}
		if n, err := u.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("give the units back: voucher %d has no stock row (%v)", v, err)
		}
	}
	return nil
}

func recordRefundActions(ctx context.Context, tx bun.Tx, begun []refund.Begun, at time.Time) error {
	rows := make([]actionRow, len(begun))
	for i, b := range begun {
		after, _ := json.Marshal(map[string]any{"orderId": fmt.Sprint(b.Order.ID), "status": "refunded", "returnUnit": b.ReturnUnit,
			"paymentId": b.Payment.ID, "amount": b.Payment.Amount})
		rows[i] = actionRow{At: at.UTC(), Operator: b.Operator, TokenFingerprint: b.Fingerprint, Action: actionRefund,
			VoucherID: sql.NullInt64{Int64: b.Order.VoucherID, Valid: true}, BeforeState: `{"status":"paid"}`, AfterState: string(after),
			Note: b.Note, State: "done"}
	}
	_, err := tx.NewInsert().Model(&rows).Exec(ctx)
	return err
}

// Finish implements refund.Store.
func (s *Refunds) Finish(ctx context.Context, begun []refund.Begun, at time.Time) error {
	if len(begun) == 0 {
		return nil
	}
	orders, payments := make([]int64, len(begun)), make([]string, len(begun))
	for i, b := range begun {
		orders[i], payments[i] = b.Order.ID, b.Payment.ID
	}
	err := retryConflicts(ctx, func() error {
		return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewUpdate().Table("tb_voucher_order").Set("status = ?", orderStatusRefunded).Set("update_time = ?", at.UTC()).
				Where("id IN (?)", bun.List(orders)).Where("status = ?", orderStatusRefunding).Exec(ctx); err != nil {
				return err
			}
			_, err := tx.NewUpdate().Table("tb_payment").Set("state = ?", string(core.PaymentRefunded)).
				Set("word = ?", string(core.PaymentRefunded)).Set("word_refunded = word_taken").Where("id IN (?)", bun.List(payments)).Exec(ctx)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("mysqlstore: finish refunds: %w", err)
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
	paying, err := payingPayments(ctx, s.db, rowIDs(rows))
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: unfinished refunds' payments: %w", err)
	}
	out := make([]refund.Begun, 0, len(rows))
	for _, r := range rows {
		p, ok := paying[r.ID]
		if !ok {
			return nil, fmt.Errorf("mysqlstore: unfinished refund of order %d: no payment paid it", r.ID)
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
