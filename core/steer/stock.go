package steer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/seckill-lab/seckill/core"
)

// ChangeStock takes or adds delta units of a voucher with sales running:
// the live stock and the database's stock column move together, once,
// whatever dies between (the record, pending from the first step, is
// finished by any instance). Taking more than remains is refused
// (core.CodeNotEnoughStock): sold units are never taken back. It returns
// the units left.
func (s *Steering) ChangeStock(ctx context.Context, r Request, delta int64) (int64, error) {
	if delta == 0 || delta > core.MaxStock || delta < -core.MaxStock {
		return 0, core.E(core.CodeBadRequest, fmt.Sprintf("delta must be a non-zero number of units, at most %d either way", int64(core.MaxStock)))
	}
	release, err := s.locker.Lock(ctx, lockName, lockTTL)
	if err != nil {
		return 0, core.Wrap("steer: lock", core.CodeBusy, err)
	}
	defer release()
	v, err := s.store.FindVoucher(ctx, r.VoucherID)
	if err != nil {
		return 0, err
	}
	if !s.now().Before(v.EndAt) {
		return 0, conflict(core.CodeEnded, "the sale has ended")
	}
	before, _ := json.Marshal(map[string]int64{"stockColumn": v.Stock})
	after, _ := json.Marshal(map[string]int64{"delta": delta})
	id, err := s.store.BeginStock(ctx, Action{At: s.now(), Operator: r.Operator, Kind: Stock, VoucherID: v.ID, Note: r.Note,
		Before: before, After: after})
	if err != nil {
		return 0, core.Wrap("steer: record", core.CodeUnavailable, err)
	}
	left, err := s.settleStock(ctx, v, id, delta)
	if err != nil {
		return 0, err
	}
	s.announce.VoucherChanged(context.WithoutCancel(ctx), v.ID)
	s.obs.Acted(Stock)
	return left, nil
}

// settleStock runs a recorded stock action's live half, then the
// database's (both once, by the action's id): the units left, or
// CodeNotEnoughStock.
func (s *Steering) settleStock(ctx context.Context, v core.Voucher, id, delta int64) (int64, error) {
	if v.BucketCount() > 1 {
		return s.settleBucketStock(ctx, v, id, delta)
	}
	var change StockChange
	err := s.patiently(ctx, func() (err error) {
		// A voucher nobody bought since Redis forgot it (or since this
		// instance started) is loaded first, from the database.
		if err := s.guard.Ensure(ctx, v.ID, core.Wait); err != nil {
			return err
		}
		change, err = s.live.ChangeStock(ctx, v, id, delta)
		return err
	})
	if err != nil {
		return 0, core.Wrap("steer: the live stock", core.CodeUnavailable, err)
	}
	refused, _, err := s.store.FinishStock(ctx, id, v.ID, delta, change.Applied)
	if err != nil {
		return 0, core.Wrap("steer: the stock column", core.CodeUnavailable, err)
	}
	if refused {
		return change.Remaining, conflict(core.CodeNotEnoughStock, "that takes more units than remain: sold units are never taken back")
	}
	if change.Remaining < 0 { // the database is the live state
		now, err := s.store.FindVoucher(ctx, v.ID)
		if err != nil {
			return 0, err
		}
		return now.Stock, nil
	}
	return change.Remaining, nil
}

// finishStock finishes a stock action its instance left pending.
func (s *Steering) finishStock(ctx context.Context, a Action) error {
	var rec struct {
		Delta int64 `json:"delta"`
	}
	if err := json.Unmarshal(a.After, &rec); err != nil || rec.Delta == 0 {
		return fmt.Errorf("steer: stock action %d records no delta: %s", a.ID, a.After)
	}
	v, err := s.store.FindVoucher(ctx, a.VoucherID)
	if err != nil {
		return err
	}
	if _, err := s.settleStock(ctx, v, a.ID, rec.Delta); err != nil && !IsConflict(err) {
		return err
	}
	s.announce.VoucherChanged(ctx, v.ID)
	return nil
}

// settleBucketStock is settleStock for a voucher in buckets, whose stock
// is spread over several keys (and masters) no one script moves: the
// voucher is reconciled, and within the reconcile's fence (no sale of it
// meanwhile) the column moves, once by the action's id, and the units left
// are restored with the change. Killed anywhere, the column is the truth:
// the next rebuild deals what it says.
func (s *Steering) settleBucketStock(ctx context.Context, v core.Voucher, id, delta int64) (int64, error) {
	var refused bool
	var left int64
	_, err := s.restock.ReconcileChanging(ctx, v.ID, func(ctx context.Context, remaining int64) (int64, error) {
		moved, ok, err := s.store.FinishStock(ctx, id, v.ID, delta, remaining+delta >= 0)
		if err != nil {
			return 0, err
		}
		refused, left = moved, remaining
		if !ok || moved {
			return 0, nil // finished before (the snapshot has it), or refused
		}
		left += delta
		return delta, nil
	})
	if err != nil {
		if IsConflict(err) {
			return 0, err
		}
		return 0, core.Wrap("steer: reconcile the voucher's buckets", core.CodeUnavailable, err)
	}
	if refused {
		return left, conflict(core.CodeNotEnoughStock, "that takes more units than remain: sold units are never taken back")
	}
	return left, nil
}
