package steer

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Config is what a Steering needs; Live, Announcer and Observer may be
// left out (the database is the live state; nothing to tell; nothing
// counted).
type Config struct {
	Store  Store
	Live   Live
	Locker Locker
	// Guard loads a voucher's live state before its stock is changed
	// (nil: core.NoRecovery, the database is the live state).
	Guard     core.LiveGuard
	Announcer Announcer
	Observer  Observer
	// Consumers is where every instance's consumers read the operator's
	// setting (nil: NoConsumers, a sale with no queue).
	Consumers ConsumerBoard
	// Restock changes the stock of a voucher in buckets (nil: none is).
	Restock Restocker
	Log     *slog.Logger
}

// Steering carries out operators' actions on running sales.
type Steering struct {
	store     Store
	live      Live
	guard     core.LiveGuard
	locker    Locker
	announce  Announcer
	obs       Observer
	consumers ConsumerBoard
	restock   Restocker
	log       *slog.Logger
	now       func() time.Time
}

// New builds a Steering.
func New(cfg Config) *Steering {
	s := &Steering{store: cfg.Store, live: cfg.Live, guard: core.GuardOr(cfg.Guard), locker: cfg.Locker, announce: cfg.Announcer, obs: cfg.Observer,
		consumers: cfg.Consumers, restock: cfg.Restock, log: cfg.Log, now: time.Now}
	if s.live == nil {
		s.live = DatabaseIsLive
	}
	if s.restock == nil {
		s.restock = noRestock{}
	}
	if s.consumers == nil {
		s.consumers = NoConsumers
	}
	if s.announce == nil {
		s.announce = silent{}
	}
	if s.obs == nil {
		s.obs = silent{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

type silent struct{}

func (silent) VoucherChanged(context.Context, int64) {}
func (silent) Acted(Kind)                            {}

// lockTTL bounds how long an action holds its voucher's lock, should its
// instance die holding it; applyPatience, how long an action waits for a
// rebuild of the voucher to finish before it says it could not.
const (
	lockTTL       = 10 * time.Second
	applyPatience = 5 * time.Second
)

// Request is an operator's action on one voucher: who, why.
type Request struct {
	Operator  Operator
	VoucherID int64
	Note      string
}

// Pause stops the voucher's sale: from its return on, no reservation of it
// succeeds on any instance. A sale that has ended cannot be paused.
func (s *Steering) Pause(ctx context.Context, r Request) (core.Voucher, error) {
	return s.setPause(ctx, r, Pause, core.PausedByOperator)
}

// Resume lifts a pause (the operator's or the kill switch's).
func (s *Steering) Resume(ctx context.Context, r Request) (core.Voucher, error) {
	return s.setPause(ctx, r, Resume, core.NotPaused)
}

// setPause is a pause or a resume: refused once the sale has ended.
func (s *Steering) setPause(ctx context.Context, r Request, kind Kind, pause core.Pause) (core.Voucher, error) {
	return s.act(ctx, r, kind, false, func(v core.Voucher, now time.Time) (core.Voucher, error) {
		if !now.Before(v.EndAt) {
			return v, conflict(core.CodeEnded, "the sale has ended: there is nothing to "+string(kind))
		}
		v.Pause = pause
		return v, nil
	})
}

// EndNow ends the voucher's sale now: its end is now (an end already past
// stays). Orders already reserved go on through their lifecycle.
func (s *Steering) EndNow(ctx context.Context, r Request) (core.Voucher, error) {
	return s.act(ctx, r, End, true, func(v core.Voucher, now time.Time) (core.Voucher, error) {
		if now.Before(v.EndAt) {
			v.EndAt = now
			if v.BeginAt.After(v.EndAt) {
				v.BeginAt = v.EndAt // a sale ended before it began
			}
		}
		return v, nil
	})
}

// Window is a new window for a voucher: its end, and its begin (zero:
// unchanged).
type Window struct {
	BeginAt, EndAt time.Time
}

// Reschedule moves the voucher's end, and its begin before the sale (and
// its room) begins.
func (s *Steering) Reschedule(ctx context.Context, r Request, w Window) (core.Voucher, error) {
	return s.act(ctx, r, Reschedule, false, func(v core.Voucher, now time.Time) (core.Voucher, error) {
		if !w.BeginAt.IsZero() && !w.BeginAt.Equal(v.BeginAt) {
			if !now.Before(v.BeginAt) || (v.Room != nil && !now.Before(v.Room.OpensAt)) {
				return v, conflict(core.CodeAlreadyBegun, "the sale (or its room) has begun: its begin can no longer move")
			}
			v.BeginAt = w.BeginAt
		}
		if !w.EndAt.IsZero() {
			v.EndAt = w.EndAt
		}
		if err := v.ValidateWindow(); err != nil {
			return v, err
		}
		return v, nil
	})
}

// act runs one action under the voucher's lock: the database's half with
// its record, then the live store's half, then done.
func (s *Steering) act(ctx context.Context, r Request, kind Kind, endNow bool,
	change func(core.Voucher, time.Time) (core.Voucher, error)) (core.Voucher, error) {
	release, err := s.locker.Lock(ctx, lockName, lockTTL)
	if err != nil {
		return core.Voucher{}, core.Wrap("steer: lock the voucher", core.CodeBusy, err)
	}
	defer release()
	now := s.now()
	after, id, err := s.store.Steer(ctx, r.VoucherID, func(before core.Voucher) (core.Voucher, Action, error) {
		v, err := change(before, now)
		if err != nil {
			return before, Action{}, err
		}
		return v, Action{At: now, Operator: r.Operator, Kind: kind, VoucherID: r.VoucherID, Note: r.Note,
			Before: settings(before, now), After: settings(v, now)}, nil
	})
	if err != nil {
		return core.Voucher{}, err
	}
	if err := s.applyLive(ctx, after, endNow); err != nil {
		// Pending: the duty finishes it once the live store answers.
		return after, core.Wrap("steer: the live state", core.CodeUnavailable, err)
	}
	if err := s.store.Done(ctx, id); err != nil {
		s.log.Warn("steer: an action's record stays pending; the duty finishes it", "action", id, "err", err)
	}
	s.announce.VoucherChanged(context.WithoutCancel(ctx), r.VoucherID)
	s.obs.Acted(kind)
	return after, nil
}

// applyLive writes the settings into the live store, waiting out a rebuild
// of the voucher for at most applyPatience.
func (s *Steering) applyLive(ctx context.Context, v core.Voucher, endNow bool) error {
	return s.patiently(ctx, func() error { return s.live.Apply(ctx, v, endNow) })
}

// patiently runs a live write again while a rebuild of the voucher holds
// it (core.ErrBusy), for at most applyPatience.
func (s *Steering) patiently(ctx context.Context, write func() error) error {
	deadline := s.now().Add(applyPatience)
	for {
		err := write()
		if !errors.Is(err, core.ErrBusy) || s.now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lockName is the one lock every action takes: actions are rare, and one
// lock keeps the kill switch and a voucher's own action from interleaving
// their halves, and a voucher created meanwhile from missing the switch.
const lockName = "steer"

// settings are what an action records of a voucher before and after it.
func settings(v core.Voucher, now time.Time) json.RawMessage {
	out, _ := json.Marshal(map[string]any{"state": v.StateAt(now, 1), "paused": v.Paused(),
		"beginTime": v.BeginAt.UTC(), "endTime": v.EndAt.UTC()})
	return out
}
