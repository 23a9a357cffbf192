package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core"
)

// The database is the lifecycle's arbiter (core.LifecycleStore): every
// transition is a conditional update of the order's status, so of pay,
// cancel and expiry exactly one changes it, and the stock and the pending
// release change in the same transaction as the status.

type releaseRow struct {
	bun.BaseModel `bun:"table:tb_order_release"`
	OrderID       int64     `bun:"order_id,pk"`
	VoucherID     int64     `bun:"voucher_id"`
	UserID        int64     `bun:"user_id"`
	CreateTime    time.Time `bun:"create_time"`
}

// CancelOrder implements core.LifecycleStore.
func (s *Lifecycle) CancelOrder(ctx context.Context, orderID, owner int64, reason core.CancelReason, now time.Time) (core.Order, error) {
	var out core.Order
	err := retryConflicts(ctx, func() error {
		return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			q := tx.NewUpdate().Table("tb_voucher_order").
				Set("status = ?", orderStatusCancelled).
				Set("cancel_reason = ?", string(reason)).
				Set("update_time = ?", now.UTC()).
				Where("id = ?", orderID).
				Where("status = ?", orderStatusCreated)
			if owner != 0 {
				q = q.Where("user_id = ?", owner)
			}
			if reason == core.CancelExpired {
				q = q.Where("pay_by <= ?", now.UTC())
			}
			r, err := q.Exec(ctx)
			if err != nil {
				return fmt.Errorf("cancel: %w", err)
			}
			won, err := r.RowsAffected()
			if err != nil {
				return err
			}
			var row orderRow
			err = tx.NewSelect().Model(&row).Where("id = ?", orderID).Scan(ctx)
			switch {
			case errors.Is(err, sql.ErrNoRows), err == nil && owner != 0 && row.UserID != owner:
				return core.ErrOrderNotFound
			case err != nil:
				return fmt.Errorf("cancel: read the order: %w", err)
			case won == 0:
				return core.ErrNotCancellable
			}
			u, err := tx.NewUpdate().Table("tb_seckill_voucher").
				Set("stock = stock + 1").Set("update_time = ?", now.UTC()).
				Where("voucher_id = ?", row.VoucherID).Exec(ctx)
			if err != nil {
				return fmt.Errorf("cancel: give the unit back: %w", err)
			}
			if n, err := u.RowsAffected(); err != nil {
				return err
			} else if n != 1 {
				return fmt.Errorf("cancel: voucher %d has no stock row", row.VoucherID)
			}
			if err := recordRelease(ctx, tx, row.order(), now); err != nil {
				return fmt.Errorf("cancel: %w", err)
			}
			out = row.order()
			return nil
		})
	})
	if err != nil {
		// Wrapped, ErrOrderNotFound and ErrNotCancellable still answer
		// errors.Is and keep their codes.
		return core.Order{}, fmt.Errorf("mysqlstore: %w", err)
	}
	return out, nil
}

// recordRelease records, in the transaction that cancels o, that Redis is
// still to get o's unit back (tb_order_release).
func recordRelease(ctx context.Context, tx bun.Tx, o core.Order, now time.Time) error {
	rel := releaseRow{OrderID: o.ID, VoucherID: o.VoucherID, UserID: o.UserID, CreateTime: now.UTC()}
	if _, err := tx.NewInsert().Model(&rel).Exec(ctx); err != nil {
		return fmt.Errorf("record the release: %w", err)
	}
	return nil
}

// CancelQueued implements core.LifecycleStore: the cancelled row of an
// order the database does not have (queued past its deadline, or
// dead-lettered and discarded), inserted unless the id is taken (persisted
// meanwhile). It takes nothing from the stock column, which the order
// never took; the pending release gives Redis the unit.
func (s *Lifecycle) CancelQueued(ctx context.Context, o core.Order, reason core.CancelReason, now time.Time) (bool, error) {
	var won bool
	err := retryConflicts(ctx, func() error {
		return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			created := o.CreatedAt
			if created.IsZero() {
				created = now
			}
			row := orderRow{ID: o.ID, UserID: o.UserID, VoucherID: o.VoucherID, Status: orderStatusCancelled,
				PayBy: nullTime(o.PayBy), CancelReason: sql.NullString{String: string(reason), Valid: true},
				CreateTime: created.UTC(), UpdateTime: now.UTC()}
			r, err := tx.NewInsert().Model(&row).Ignore().Exec(ctx)
			if err != nil {
				return fmt.Errorf("expire a queued order: %w", err)
			}
			n, err := r.RowsAffected()
			if err != nil {
				return err
			}
			if won = n == 1; !won {
				return nil
			}
			if err := recordRelease(ctx, tx, o, now); err != nil {
				return fmt.Errorf("expire a queued order: %w", err)
			}
			return nil
		})
	})
	if err != nil {
		return false, fmt.Errorf("mysqlstore: %w", err)
	}
	return won, nil
}

// DueOrders implements core.LifecycleStore (idx_order_status_pay_by).
func (s *Lifecycle) DueOrders(ctx context.Context, now time.Time, limit int) ([]int64, error) {
	var ids []int64
	err := s.db.NewSelect().Table("tb_voucher_order").Column("id").
		Where("status = ?", orderStatusCreated).Where("pay_by <= ?", now.UTC()).
		OrderExpr("pay_by").Limit(int64(limit)).Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: due orders: %w", err)
	}
	return ids, nil
}

// PendingReleases implements core.LifecycleStore.
func (s *Lifecycle) PendingReleases(ctx context.Context, before time.Time, limit int) ([]core.Order, error) {
	var rows []releaseRow
	err := s.db.NewSelect().Model(&rows).Where("create_time <= ?", before.UTC()).
		OrderExpr("create_time").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: pending releases: %w", err)
	}
	out := make([]core.Order, len(rows))
	for i, r := range rows {
		out[i] = core.Order{ID: r.OrderID, UserID: r.UserID, VoucherID: r.VoucherID, Status: core.StatusCancelled}
	}
	return out, nil
}

// Released implements core.LifecycleStore.
func (s *Lifecycle) Released(ctx context.Context, orderIDs ...int64) error {
	if len(orderIDs) == 0 {
		return nil
	}
	if _, err := s.db.NewDelete().Model((*releaseRow)(nil)).Where("order_id IN (?)", bun.List(orderIDs)).Exec(ctx); err != nil {
		return fmt.Errorf("mysqlstore: forget release: %w", err)
	}
	return nil
}

var _ core.LifecycleStore = (*Lifecycle)(nil)

// OrderCounts counts every order by where it is in its lifecycle:
// created (unpaid), paid, cancelled by expiry, by the shopper and by an
// operator's discard of its dead letter, refunded (the dashboard's
// figures; the database's, so the same on every instance). A cancelled
// row without a reason (from before reasons were kept) is counted as such,
// never as the shopper's.
func (s *Ledger) OrderCounts(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Status int            `bun:"status"`
		Reason sql.NullString `bun:"cancel_reason"`
		N      int64          `bun:"n"`
	}
	if err := s.db.NewSelect().Table("tb_voucher_order").ColumnExpr("status, cancel_reason, COUNT(*) AS n").
		GroupExpr("status, cancel_reason").Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("mysqlstore: order counts: %w", err)
	}
	out := map[string]int64{"unpaid": 0, "paid": 0, "expired": 0, "cancelled by shopper": 0, "discarded by operator": 0, "refunded": 0}
	for _, r := range rows {
		switch st := orderStatuses[r.Status]; {
		case st == core.StatusCreated:
			out["unpaid"] += r.N
		case st == core.StatusPaid:
			out["paid"] += r.N
		case st == core.StatusRefunded:
			out["refunded"] += r.N
		case st == core.StatusCancelled:
			out[cancelledAs(core.CancelReason(r.Reason.String))] += r.N
		}
	}
	return out, nil
}

// cancelledAs is the dashboard's name of a cancellation's reason.
func cancelledAs(reason core.CancelReason) string {
	switch reason {
	case core.CancelExpired:
		return "expired"
	case core.CancelShopper:
		return "cancelled by shopper"
	case core.CancelDiscarded:
		return "discarded by operator"
	}
	return "cancelled, no reason kept"
}

// VoucherSummaries lists vouchers newest first, those with an id below
// before (0: from the newest), at most limit, each with its stock column
// and its orders by state: the operator's list. Two queries, the second
// over the page's vouchers alone (idx on voucher_id), not a join that
// groups every order of the table.
func (s *Store) VoucherSummaries(ctx context.Context, before int64, limit int) ([]core.VoucherSummary, error) {
	var vouchers []struct {
		ID          int64     `bun:"id"`
		Title       string    `bun:"title"`
		PayValue    int64     `bun:"pay_value"`
		ActualValue int64     `bun:"actual_value"`
		Stock       int64     `bun:"stock"`
		BeginTime   time.Time `bun:"begin_time"`
		EndTime     time.Time `bun:"end_time"`
		Buckets     int       `bun:"buckets"`
		Paused      int       `bun:"paused"`
	}
	q := s.db.NewSelect().TableExpr("tb_voucher AS v").Join("JOIN tb_seckill_voucher AS sv ON sv.voucher_id = v.id").
		ColumnExpr("v.id, v.title, v.pay_value, v.actual_value, sv.stock, sv.begin_time, sv.end_time, sv.buckets, sv.paused").
		OrderExpr("v.id DESC").Limit(int64(limit))
	if before > 0 {
		q = q.Where("v.id < ?", before)
	}
	if err := q.Scan(ctx, &vouchers); err != nil {
		return nil, fmt.Errorf("mysqlstore: list vouchers: %w", err)
	}
	out := make([]core.VoucherSummary, len(vouchers))
	at := make(map[int64]int, len(vouchers))
	ids := make([]int64, len(vouchers))
	for i, v := range vouchers {
		out[i].Voucher = core.Voucher{ID: v.ID, Title: v.Title, PayValue: v.PayValue, ActualValue: v.ActualValue,
			Stock: v.Stock, BeginAt: v.BeginTime.UTC(), EndAt: v.EndTime.UTC(), Buckets: v.Buckets, Pause: core.Pause(v.Paused)}
		at[v.ID], ids[i] = i, v.ID
	}
	if len(ids) == 0 {
		return out, nil
	}
	var counts []struct {
		VoucherID int64 `bun:"voucher_id"`
		Status    int   `bun:"status"`
		N         int64 `bun:"n"`
	}
	if err := s.db.NewSelect().Table("tb_voucher_order").ColumnExpr("voucher_id, status, COUNT(*) AS n").
		Where("voucher_id IN (?)", bun.List(ids)).GroupExpr("voucher_id, status").Scan(ctx, &counts); err != nil {
		return nil, fmt.Errorf("mysqlstore: count orders by voucher: %w", err)
	}
	for _, c := range counts {
		v := &out[at[c.VoucherID]]
		switch orderStatuses[c.Status] {
		case core.StatusCreated:
			v.Unpaid += c.N
		case core.StatusPaid:
			v.Paid += c.N
		case core.StatusCancelled:
			v.Cancelled += c.N
		case core.StatusRefunded:
			v.Refunded += c.N
		}
	}
	return out, nil
}
