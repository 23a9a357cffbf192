package steer

import (
	"context"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// finishAfter is how old a pending action is before any instance finishes
// it: its own instance, alive, is done with it in well under a second.
const finishAfter = 5 * time.Second

// Duty finishes the actions left pending (their instance died between the
// halves, or the live store did not answer): for each, under the
// voucher's lock, the database's settings are written into the live store
// again, and the action is done. Every instance runs it; the lock and the
// writes, which set rather than add, make two finishing one harmless.
func (s *Steering) Duty() core.Duty {
	return core.Duty{Name: "steering: finish pending actions", Every: time.Second, Do: s.finishPending}
}

func (s *Steering) finishPending(ctx context.Context) error {
	pending, err := s.store.Pending(ctx, s.now().Add(-finishAfter), 100)
	if err != nil {
		return err
	}
	for _, a := range pending {
		if err := s.finish(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

func (s *Steering) finish(ctx context.Context, a Action) error {
	release, err := s.locker.Lock(ctx, lockName, lockTTL)
	if err != nil {
		return err
	}
	defer release()
	if a.Kind == Stock {
		return s.finishStock(ctx, a)
	}
	if consumersKind(a.Kind) {
		return s.finishConsumers(ctx, a)
	}
	vouchers, err := s.touched(ctx, a)
	if err != nil {
		return err
	}
	for _, v := range vouchers {
		// The end as the database has it: an "end now" recorded its time.
		if err := s.live.Apply(ctx, v, false); err != nil {
			return err
		}
	}
	if err := s.store.Done(ctx, a.ID); err != nil {
		return err
	}
	s.log.Warn("steer: finished an action its instance left pending", "action", a.ID, "kind", a.Kind, "voucher", a.VoucherID)
	for _, v := range vouchers {
		s.announce.VoucherChanged(ctx, v.ID)
	}
	return nil
}

// touched are the vouchers an action may have changed, as the database has
// them now: its voucher, or for the kill switch every voucher not ended.
func (s *Steering) touched(ctx context.Context, a Action) ([]core.Voucher, error) {
	if a.VoucherID == 0 {
		return s.store.Unended(ctx, s.now())
	}
	v, err := s.store.FindVoucher(ctx, a.VoucherID)
	return []core.Voucher{v}, err
}

// Actions pages the record of actions, newest first.
func (s *Steering) Actions(ctx context.Context, f Filter) ([]Action, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	return s.store.Actions(ctx, f)
}
