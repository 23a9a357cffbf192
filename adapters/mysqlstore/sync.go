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

// SyncSale is the baseline the classic series started from (SECKILL_QUEUE=
// sync): no Redis reservation and no queue; the request itself runs one
// database transaction — window, stock, one order per user, the optimistic
// `stock = stock - 1 WHERE stock > 0`, the insert. It implements
// core.Reserver and core.StockBoard, so the same HTTP path serves it.
type SyncSale struct {
	s   *Store
	now func() time.Time
	// payWindow is how long an order may stay unpaid (its pay_by).
	payWindow time.Duration
}

// SyncSale returns the synchronous sale over this store, whose orders are
// to be paid within payWindow (0: they never expire).
func (s *Store) SyncSale(payWindow time.Duration) *SyncSale {
	return &SyncSale{s: s, now: time.Now, payWindow: payWindow}
}

// Reserve runs the whole sale in one transaction. Like the script it is
// replay-safe: the same order id again is reported as Reserved.
func (ss *SyncSale) Reserve(ctx context.Context, o core.Order) (core.Reservation, error) {
	var out core.Reservation
	err := retryConflicts(ctx, func() error {
		var err error
		out, err = ss.reserveOnce(ctx, o)
		return err
	})
	if err != nil {
		return core.Reservation{}, fmt.Errorf("mysqlstore: sync sale: %w", err)
	}
	return out, nil
}

// errRefused rolls the transaction back with the refusal in res.
var errRefused = errors.New("refused")

func (ss *SyncSale) reserveOnce(ctx context.Context, o core.Order) (core.Reservation, error) {
	var res core.Reservation
	err := ss.s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var sv seckillVoucherRow
		err := tx.NewSelect().Model(&sv).Where("voucher_id = ?", o.VoucherID).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			res = core.Reservation{Result: core.VoucherMissing}
			return errRefused
		}
		if err != nil {
			return err
		}
		held, err := heldOrder(ctx, tx, o.UserID, o.VoucherID)
		if err != nil {
			return err
		}
		now := ss.now()
		if r, refused := syncRefusal(sv, held, o, now); refused {
			res = r
			return errRefused
		}
		u, err := tx.NewUpdate().Table("tb_seckill_voucher").
			Set("stock = stock - 1").Set("update_time = ?", now.UTC()).
			// paused = 0 here too: the update reads the row as committed
			// now, so a pause committed since the select above holds.
			Where("voucher_id = ?", o.VoucherID).Where("stock > 0").Where("paused = 0").Exec(ctx)
		if err != nil {
			return err
		}
		if n, err := u.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			res = core.Reservation{Result: core.SoldOut}
			if paused, perr := pausedNow(ctx, tx, o.VoucherID, ss.s.dialect == dialectMySQL); perr == nil && paused {
				res = core.Reservation{Result: core.Paused}
			}
			return errRefused
		}
		row := orderRow{ID: o.ID, UserID: o.UserID, VoucherID: o.VoucherID, Status: orderStatusCreated,
			CreateTime: o.CreatedAt.UTC(), UpdateTime: now.UTC(), Traceparent: nullString(o.Trace)}
		if ss.payWindow > 0 {
			row.PayBy = nullTime(o.CreatedAt.Add(ss.payWindow))
		}
		if _, err := tx.NewInsert().Model(&row).Exec(ctx); err != nil {
			return err
		}
		res = core.Reservation{Result: core.Reserved, OrderID: o.ID}
		return nil
	})
	switch {
	case err == nil, errors.Is(err, errRefused):
		return res, nil
	case isDuplicateKey(err):
		// The same user's concurrent request won the unique index.
		held, herr := heldOrder(ctx, ss.s.db, o.UserID, o.VoucherID)
		if herr != nil {
			return core.Reservation{}, herr
		}
		if held == o.ID {
			return core.Reservation{Result: core.Reserved, OrderID: o.ID}, nil
		}
		return core.Reservation{Result: core.AlreadyPurchased, OrderID: held}, nil
	}
	return core.Reservation{}, err
}

// syncRefusal is the rule book's answer before any write, in the script's
// order: a replay, the window, the pause, the buyer, the stock.
func syncRefusal(sv seckillVoucherRow, held int64, o core.Order, now time.Time) (core.Reservation, bool) {
	switch {
	case held == o.ID:
		return core.Reservation{Result: core.Reserved, OrderID: o.ID}, true // a replay: nothing to write
	case now.Before(sv.BeginTime):
		return core.Reservation{Result: core.NotStarted}, true
	case !now.Before(sv.EndTime):
		return core.Reservation{Result: core.Ended}, true
	case sv.Paused != 0:
		return core.Reservation{Result: core.Paused}, true
	case held != 0: // the buyer before the stock, as the script checks
		return core.Reservation{Result: core.AlreadyPurchased, OrderID: held}, true
	case sv.Stock <= 0:
		return core.Reservation{Result: core.SoldOut}, true
	}
	return core.Reservation{}, false
}

// pausedNow reads whether the voucher is paused as committed now: a
// locking read on MySQL (a plain one reads the transaction's snapshot);
// SQLite, one writer at a time, sees every commit before.
func pausedNow(ctx context.Context, db bun.IDB, voucherID int64, lockingReads bool) (bool, error) {
	var paused int
	q := db.NewSelect().Model((*seckillVoucherRow)(nil)).Column("paused").Where("voucher_id = ?", voucherID)
	if lockingReads {
		q = q.For("UPDATE")
	}
	err := q.Scan(ctx, &paused)
	return paused != 0, err
}

func heldOrder(ctx context.Context, db bun.IDB, userID, voucherID int64) (int64, error) {
	var id int64
	err := db.NewSelect().Model((*orderRow)(nil)).Column("id").
		Where("user_id = ? AND voucher_id = ?", userID, voucherID).Where("status IN (?)", bun.List(liveStatuses)).Scan(ctx, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

// Release deletes exactly this order and gives its stock back; a second
// release finds nothing and changes nothing.
func (ss *SyncSale) Release(ctx context.Context, o core.Order) error {
	return ss.s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		r, err := tx.NewDelete().Model((*orderRow)(nil)).
			Where("id = ? AND user_id = ? AND voucher_id = ?", o.ID, o.UserID, o.VoucherID).Exec(ctx)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return nil
		}
		_, err = tx.NewUpdate().Table("tb_seckill_voucher").Set("stock = stock + 1").
			Where("voucher_id = ?", o.VoucherID).Exec(ctx)
		return err
	})
}

// ReservedOrder is the user's order for the voucher, from the database.
func (ss *SyncSale) ReservedOrder(ctx context.Context, userID, voucherID int64) (int64, bool, error) {
	id, err := heldOrder(ctx, ss.s.db, userID, voucherID)
	if err != nil {
		return 0, false, fmt.Errorf("mysqlstore: reserved order: %w", err)
	}
	return id, id != 0, nil
}

// LoadVoucher has nothing to do: CreateVoucher already wrote the stock.
func (ss *SyncSale) LoadVoucher(context.Context, core.Voucher) error { return nil }

// RemainingStock is the database's stock column.
func (ss *SyncSale) RemainingStock(ctx context.Context, voucherID int64) (int64, error) {
	var stock int64
	err := ss.s.db.NewSelect().Model((*seckillVoucherRow)(nil)).Column("stock").
		Where("voucher_id = ?", voucherID).Scan(ctx, &stock)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, core.ErrVoucherNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: stock: %w", err)
	}
	return stock, nil
}

var (
	_ core.Reserver   = (*SyncSale)(nil)
	_ core.StockBoard = (*SyncSale)(nil)
)
