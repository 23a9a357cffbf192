package steer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/seckill-lab/seckill/core"
)

// PauseAll is the kill switch: every voucher whose sale has not ended is
// paused at once (those an operator paused stay the operator's), and a
// voucher created while the switch is on starts paused. It returns how
// many vouchers it paused.
func (s *Steering) PauseAll(ctx context.Context, r Request) (int, error) {
	return s.flip(ctx, r, true)
}

// ResumeAll turns the kill switch off: every voucher it paused is resumed
// (one an operator paused stays paused). It returns how many.
func (s *Steering) ResumeAll(ctx context.Context, r Request) (int, error) {
	return s.flip(ctx, r, false)
}

func (s *Steering) flip(ctx context.Context, r Request, on bool) (int, error) {
	release, err := s.locker.Lock(ctx, lockName, lockTTL)
	if err != nil {
		return 0, core.Wrap("steer: lock", core.CodeBusy, err)
	}
	defer release()
	kind := map[bool]Kind{true: PauseAll, false: ResumeAll}[on]
	was, err := s.store.SwitchOn(ctx)
	if err != nil {
		return 0, core.Wrap("steer: the kill switch", core.CodeUnavailable, err)
	}
	a := Action{At: s.now(), Operator: r.Operator, Kind: kind, Note: r.Note,
		Before: json.RawMessage(fmt.Sprintf(`{"switch":%t}`, was))}
	ids, id, err := s.store.Switch(ctx, on, a)
	if err != nil {
		return 0, core.Wrap("steer: the kill switch", core.CodeUnavailable, err)
	}
	changed := make(map[int64]bool, len(ids))
	for _, vid := range ids {
		changed[vid] = true
	}
	// One read of them all, as the database has them now.
	vouchers, err := s.store.Unended(ctx, s.now())
	for _, v := range vouchers {
		if err != nil {
			break
		}
		if changed[v.ID] {
			if err = s.applyLive(ctx, v, false); err == nil {
				s.announce.VoucherChanged(context.WithoutCancel(ctx), v.ID)
			}
		}
	}
	if err != nil {
		// Pending: the duty finishes every voucher.
		return len(ids), core.Wrap("steer: the live state", core.CodeUnavailable, err)
	}
	if err := s.store.Done(ctx, id); err != nil {
		s.log.Warn("steer: an action's record stays pending; the duty finishes it", "action", id, "err", err)
	}
	s.obs.Acted(kind)
	return len(ids), nil
}

// Creating is what a voucher being created starts as: paused by the kill
// switch while it is on. The release, called once the voucher's live state
// is written, lets the next action go: a switch flipped meanwhile waits,
// and so sees the voucher.
func (s *Steering) Creating(ctx context.Context) (core.Pause, func(), error) {
	release, err := s.locker.Lock(ctx, lockName, lockTTL)
	if err != nil {
		return core.NotPaused, nil, core.Wrap("steer: lock", core.CodeBusy, err)
	}
	on, err := s.store.SwitchOn(ctx)
	if err != nil {
		release()
		return core.NotPaused, nil, core.Wrap("steer: the kill switch", core.CodeUnavailable, err)
	}
	if on {
		return core.PausedBySwitch, release, nil
	}
	return core.NotPaused, release, nil
}
