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
// column, and its persisted orders with their statuses, read in one
// transaction so the two agree (InnoDB's repeatable read: one snapshot for
// both reads).
func (s *Ledger) SaleSnapshot(ctx context.Context, voucherID int64) (core.Voucher, []core.Order, error) {
	var (
		v      core.Voucher
		orders []core.Order
	)
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if v, err = findVoucher(ctx, tx, voucherID); err != nil {
			return err
		}
		var rows []orderRow
		if err := tx.NewSelect().Model(&rows).Column("id", "user_id", "voucher_id", "status", "create_time").
			Where("voucher_id = ?", voucherID).Scan(ctx); err != nil {
			return fmt.Errorf("mysqlstore: orders of voucher %d: %w", voucherID, err)
		}
		orders = make([]core.Order, len(rows))
		for i, r := range rows {
			orders[i] = r.order()
		}
		return nil
	})
	return v, orders, err
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
	out := make(map[int64]core.OrderStatus, len(orderIDs))
	if len(orderIDs) == 0 {
		return out, nil
	}
	var rows []orderRow
	if err := s.db.NewSelect().Model(&rows).Column("id", "status").Where("id IN (?)", bun.List(orderIDs)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("mysqlstore: order statuses: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r.order().Status
	}
	return out, nil
}

// FindVoucher implements recovery.Ledger: the voucher as the rebuild
// reads it.
func (s *Ledger) FindVoucher(ctx context.Context, id int64) (core.Voucher, error) {
	return findVoucher(ctx, s.db, id)
}

var _ recovery.Ledger = (*Ledger)(nil)
