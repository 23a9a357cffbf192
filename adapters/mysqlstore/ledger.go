package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
)

// The store is the ledger a rebuild of Redis reads (recovery.Ledger): the
// truth of a sale, since every persisted order took its stock in the same
// transaction that inserted it.

// SaleSnapshot implements recovery.Ledger: the voucher with its stock
// column, its live orders, and the statuses of the orders among also, read
// in one transaction so they agree (InnoDB's repeatable read: one snapshot
// for every read). Only the live orders are read, never the voucher's
// cancelled history: what a rebuild or an audit holds is bounded by the
// stock, not by the orders the sale ever took.
func (s *Ledger) SaleSnapshot(ctx context.Context, voucherID int64, also []int64) (core.Voucher, []core.Order, map[int64]core.OrderStatus, error) {
	var (
		v      core.Voucher
		orders []core.Order
		known  map[int64]core.OrderStatus
	)
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if v, err = findVoucher(ctx, tx, voucherID); err != nil {
			return err
		}
		var rows []orderRow
		if err := tx.NewSelect().Model(&rows).Column("id", "user_id", "voucher_id", "status", "cancel_reason", "create_time").
			Where("voucher_id = ?", voucherID).
			// A refund that kept its unit still holds it (and its buyer).
			WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
				return q.Where("status IN (?)", bun.List([]int{orderStatusCreated, orderStatusPaid})).
					WhereOr("status IN (?) AND cancel_reason = ?", bun.List([]int{orderStatusRefunding, orderStatusRefunded}), string(core.CancelRefundedUnitKept))
			}).
			Scan(ctx); err != nil {
			return fmt.Errorf("mysqlstore: live orders of voucher %d: %w", voucherID, err)
		}
		orders = make([]core.Order, len(rows))
		for i, r := range rows {
			orders[i] = r.order()
		}
		known, err = statusesOf(ctx, tx, also)
		return err
	})
	return v, orders, known, err
}

// MaxOrderSequence is the largest per-day sequence (the low 32 bits of
// an id) in [lo, hi] among the persisted orders whose ids were issued on
// or after since, 0 for none: the floor the ID worker's counter of that
// range (a lane) must pass after Redis forgot it.
func (s *Ledger) MaxOrderSequence(ctx context.Context, epoch, since time.Time, lo, hi int64) (int64, error) {
	first := (since.Unix() - epoch.Unix()) << 32
	var seq sql.NullInt64
	err := s.db.NewSelect().Table("tb_voucher_order").ColumnExpr("MAX(id & ?)", int64(1<<32-1)).
		Where("id >= ?", first).Where("(id & ?) BETWEEN ? AND ?", int64(1<<32-1), lo, hi).Scan(ctx, &seq)
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: max order sequence: %w", err)
	}
	return seq.Int64, nil
}

// OrderStatuses implements recovery.Ledger.
func (s *Ledger) OrderStatuses(ctx context.Context, orderIDs []int64) (map[int64]core.OrderStatus, error) {
	return statusesOf(ctx, s.db, orderIDs)
}

// statusChunk is the ids one IN list carries.
const statusChunk = 1000

// statusesOf is the status of each of orderIDs db has.
func statusesOf(ctx context.Context, db bun.IDB, orderIDs []int64) (map[int64]core.OrderStatus, error) {
	out := make(map[int64]core.OrderStatus, len(orderIDs))
	for from := 0; from < len(orderIDs); from += statusChunk {
		var rows []orderRow
		if err := db.NewSelect().Model(&rows).Column("id", "status").
			Where("id IN (?)", bun.List(orderIDs[from:min(from+statusChunk, len(orderIDs))])).Scan(ctx); err != nil {
			return nil, fmt.Errorf("mysqlstore: order statuses: %w", err)
		}
		for _, r := range rows {
			out[r.ID] = r.order().Status
		}
	}
	return out, nil
}

// FindVoucher implements recovery.Ledger: the voucher as the rebuild
// reads it.
func (s *Ledger) FindVoucher(ctx context.Context, id int64) (core.Voucher, error) {
	return findVoucher(ctx, s.db, id)
}

var _ recovery.Ledger = (*Ledger)(nil)

// LetteredOrders implements recovery.Ledger: the voucher's open dead
// letters that hold a unit, as their orders (each letter's row carries
// its order's id and buyer; the body, when it decodes, its time).
func (s *Ledger) LetteredOrders(ctx context.Context, voucherID int64) ([]core.Order, error) {
	var rows []deadLetterRow
	if err := s.db.NewSelect().Model(&rows).Column("order_id", "user_id", "voucher_id", "body", "first_failed").
		Where("voucher_id = ?", voucherID).Where("resolved_time IS NULL").Where("order_id IS NOT NULL").
		Where("reason NOT IN (?)", bun.List(holdsNoUnit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("mysqlstore: dead-lettered orders of voucher %d: %w", voucherID, err)
	}
	out := make([]core.Order, len(rows))
	for i, r := range rows {
		out[i] = r.order()
	}
	return out, nil
}
