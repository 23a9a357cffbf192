package core

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// After the reservation: an unpaid order is cancelled by its shopper or
// expires at its deadline, and its unit goes back on sale exactly once.
//
// The database is the one arbiter of every transition: a cancellation is a
// conditional update of the order's status, in the transaction that also
// gives the unit back to the stock column and records a pending release;
// so of pay, cancel and expiry exactly one wins, whatever races. The live
// store gets the unit back after the commit (the buyer's mark removed only
// if it still names this order, so never twice), and the sweep re-drives a
// release a crash or a rebuild interrupted.

// LifecycleStore is the database's side of the lifecycle.
type LifecycleStore interface {
	// CancelOrder cancels an unpaid order, in one transaction that also
	// gives its unit back to the stock column and records a pending
	// release. owner, if not 0, must be the order's user (else
	// ErrOrderNotFound); an expiry cancels only an order past its
	// deadline at now. ErrOrderNotFound: no such order in the database;
	// ErrNotCancellable: paid, cancelled already, or not yet due.
	CancelOrder(ctx context.Context, orderID, owner int64, reason CancelReason, now time.Time) (Order, error)
	// CancelQueued cancels an order the database does not have (still
	// queued past its deadline, o.PayBy, or dead-lettered and discarded):
	// its cancelled row is inserted, for reason — the insert is the
	// arbiter, and the consumer's later insert of the same id does nothing
	// — with a pending release, in one transaction. false: a row with the
	// id exists (persisted, or cancelled, meanwhile).
	CancelQueued(ctx context.Context, o Order, reason CancelReason, now time.Time) (bool, error)
	// DueOrders lists unpaid orders whose deadline is at or before now,
	// the earliest first.
	DueOrders(ctx context.Context, now time.Time, limit int) ([]int64, error)
	// PendingReleases lists cancelled orders whose unit the live store
	// has not had back, recorded at or before `before`, oldest first.
	PendingReleases(ctx context.Context, before time.Time, limit int) ([]Order, error)
	// Released forgets pending releases: the live store has the units.
	Released(ctx context.Context, orderIDs ...int64) error
}

// ReturnResult is what giving a unit back to the live store did.
type ReturnResult int

const (
	// UnitReturned: the stock is one more and the buyer's mark is gone.
	UnitReturned ReturnResult = iota
	// NothingToReturn: the buyer's mark does not name this order (given
	// back already, or a rebuild read the cancellation from the database).
	NothingToReturn
	// ReturnLater: the voucher's live state is fenced by a rebuild or not
	// loaded; the sweep tries again.
	ReturnLater
)

// UnitReturner gives a cancelled order's unit back to the live store.
type UnitReturner interface {
	ReturnUnit(ctx context.Context, o Order) (ReturnResult, error)
}

// LifecycleObserver is told of cancellations and units given back (the
// server's metrics).
type LifecycleObserver interface {
	Cancelled(reason CancelReason)
	UnitReturned()
}

// Lifecycle cancels and expires orders and puts their units back on sale.
type Lifecycle struct {
	store LifecycleStore
	live  UnitReturner
	guard LiveGuard
	memo  *AnswerMemo
	log   *slog.Logger
	obs   LifecycleObserver
	cfg   LifecycleConfig
	now   func() time.Time
}

// LifecycleConfig is what the lifecycle is made of. Zero values take the
// defaults.
type LifecycleConfig struct {
	// Store is the database's side; required.
	Store LifecycleStore
	// Live is the live store (nil: the database is the live state, as
	// under sync: nothing to give back beyond the stock column).
	Live UnitReturner
	// Memo forgets a remembered sold out of the voucher, here and (by its
	// nudger) on every instance, when a unit comes back.
	Memo *AnswerMemo
	// Guard rebuilds a voucher whose live state a pending release found
	// missing, so the release is not retried for ever on a sale nobody
	// visits (nil: NoRecovery).
	Guard LiveGuard
	// Deadlines is the delayed path (nil: the database's sweep alone,
	// as under sync). With it, the database's sweep is the safety net:
	// it takes what is SafetyLag overdue (default 2 s: the delayed path
	// takes an order within a sweep of its deadline, so one missed sweep
	// of slack; what it claimed and lost, to a crash or to Redis, comes
	// back that much later than under the sweep alone).
	Deadlines Deadlines
	SafetyLag time.Duration
	// PayWindow is the time to pay: an order expired while queued is
	// recorded as reserved PayWindow before its deadline.
	PayWindow time.Duration
	// SweepEvery is how often due orders are expired and interrupted
	// releases re-driven (default 1 s); SweepBatch bounds each (default
	// 200).
	SweepEvery time.Duration
	SweepBatch int
	Log        *slog.Logger
	Observer   LifecycleObserver
}

// NewLifecycle builds the lifecycle, whole: it panics without a Store.
func NewLifecycle(cfg LifecycleConfig) *Lifecycle {
	if cfg.Store == nil {
		panic("core: NewLifecycle needs a Store")
	}
	if cfg.Live == nil {
		cfg.Live = DatabaseLiveState
	}
	if cfg.Memo == nil {
		cfg.Memo = NewAnswerMemo(0, nil)
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = time.Second
	}
	if cfg.SweepBatch <= 0 {
		cfg.SweepBatch = 200
	}
	if cfg.SafetyLag <= 0 {
		cfg.SafetyLag = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopLifecycleObserver{}
	}
	return &Lifecycle{store: cfg.Store, live: cfg.Live, guard: GuardOr(cfg.Guard), memo: cfg.Memo, log: cfg.Log, obs: cfg.Observer, cfg: cfg, now: time.Now}
}

// DatabaseLiveState stands in for the live store where the database is
// the live state (LifecycleConfig.Live's default): the stock column got
// the unit back in the cancellation.
var DatabaseLiveState UnitReturner = databaseLiveState{}

type databaseLiveState struct{}

func (databaseLiveState) ReturnUnit(context.Context, Order) (ReturnResult, error) {
	return NothingToReturn, nil
}

// Cancel is the shopper's cancellation of their unpaid order.
func (l *Lifecycle) Cancel(ctx context.Context, userID, orderID int64) (Order, error) {
	return l.cancel(ctx, orderID, userID, CancelShopper)
}

func (l *Lifecycle) cancel(ctx context.Context, orderID, owner int64, reason CancelReason) (Order, error) {
	o, err := l.store.CancelOrder(ctx, orderID, owner, reason, l.now())
	if err != nil {
		if errors.Is(err, ErrOrderNotFound) || errors.Is(err, ErrNotCancellable) {
			return Order{}, err
		}
		return Order{}, Wrap("cancel order", CodeUnavailable, err)
	}
	l.obs.Cancelled(reason)
	// Won and committed: the unit is the stock column's again. Redis gets
	// it now; should this fail, the sweep gives it later.
	l.Release(context.WithoutCancel(ctx), o)
	return o, nil
}

// Release gives cancelled (or refunded) orders' units back to the live
// store now, their pending releases recorded with the transitions, and
// forgets those done in one statement: one not done, the sweep re-drives
// (refund.Releaser).
func (l *Lifecycle) Release(ctx context.Context, orders ...Order) {
	done, vouchers := make([]int64, 0, len(orders)), make(map[int64]bool)
	for _, o := range orders {
		if l.returnUnit(ctx, o) {
			done, vouchers[o.VoucherID] = append(done, o.ID), true
		}
	}
	if len(done) == 0 {
		return
	}
	if err := l.store.Released(ctx, done...); err != nil {
		// The releases are done; doing them again changes nothing.
		l.log.Warn("could not forget done releases; the sweep repeats them harmlessly", "orders", len(done), "err", err)
	}
	for v := range vouchers {
		// Best effort: a memo's lifetime bounds a lost nudge.
		_ = l.memo.StockBack(ctx, v)
	}
}

// returnUnit gives o's unit back to the live store: false when not done,
// and its pending release stays for the sweep to re-drive: the live store
// was unreachable, or has no state for the voucher (then its rebuild
// starts here, and reads this cancellation from the database).
func (l *Lifecycle) returnUnit(ctx context.Context, o Order) bool {
	r, err := l.live.ReturnUnit(ctx, o)
	if err != nil {
		l.log.Warn("order cancelled; its unit goes back on sale at the next sweep", "order", o.ID, "voucher", o.VoucherID, "err", err)
		return false
	}
	if r == ReturnLater {
		// Not loaded (Redis forgot it) or being rebuilt: start the rebuild
		// now, not at the sweep's re-drive a second later.
		_ = l.guard.Lost(ctx, o.VoucherID, DontWait)
		return false
	}
	if r == UnitReturned {
		l.obs.UnitReturned()
	}
	return true
}

// Sweep expires the orders due now — those the live store hands out
// (queued or persisted), then, as the safety net, those the database holds
// overdue — and re-drives the releases a crash, a failure or a rebuild
// interrupted (recorded at least a sweep ago, so the cancellation's own
// release is not raced for nothing).
func (l *Lifecycle) Sweep(ctx context.Context) error {
	now := l.now()
	overdue := now
	if l.cfg.Deadlines != nil {
		claimed, err := l.cfg.Deadlines.ClaimDue(ctx, now, l.cfg.SweepBatch)
		for _, o := range claimed {
			if eerr := l.expire(ctx, o, now); eerr != nil {
				// Claimed and not done: the database's sweep takes it once
				// it is overdue (a queued one, once it is persisted).
				l.log.Warn("expiry: left to the database's sweep", "order", o.ID, "err", eerr)
			}
		}
		if err != nil {
			return Wrap("sweep: claim deadlines", CodeUnavailable, err)
		}
		overdue = now.Add(-l.cfg.SafetyLag)
	}
	due, err := l.store.DueOrders(ctx, overdue, l.cfg.SweepBatch)
	if err != nil {
		return Wrap("sweep: due orders", CodeUnavailable, err)
	}
	for _, id := range due {
		if _, err := l.cancel(ctx, id, 0, CancelExpired); err != nil && !errors.Is(err, ErrNotCancellable) && !errors.Is(err, ErrOrderNotFound) {
			return err // another instance winning is no error; the database failing is
		}
	}
	pending, err := l.store.PendingReleases(ctx, now.Add(-l.cfg.SweepEvery), l.cfg.SweepBatch)
	if err != nil {
		return Wrap("sweep: pending releases", CodeUnavailable, err)
	}
	l.Release(ctx, pending...)
	return nil
}

// expire cancels a reservation due for payment, persisted or still queued.
// Paid, or cancelled already, it is left as it is.
func (l *Lifecycle) expire(ctx context.Context, o Order, now time.Time) error {
	_, err := l.cancel(ctx, o.ID, 0, CancelExpired)
	if !errors.Is(err, ErrOrderNotFound) {
		if errors.Is(err, ErrNotCancellable) {
			return nil
		}
		return err
	}
	if l.cfg.PayWindow > 0 {
		o.CreatedAt = o.PayBy.Add(-l.cfg.PayWindow)
	}
	won, err := l.store.CancelQueued(ctx, o, CancelExpired, now)
	if err != nil {
		return Wrap("expire a queued order", CodeUnavailable, err)
	}
	if !won {
		// Persisted between the two: cancel the row.
		if _, err := l.cancel(ctx, o.ID, 0, CancelExpired); err != nil && !errors.Is(err, ErrNotCancellable) {
			return err
		}
		return nil
	}
	l.obs.Cancelled(CancelExpired)
	o.Status, o.CancelReason = StatusCancelled, CancelExpired
	l.Release(context.WithoutCancel(ctx), o)
	return nil
}

// Withdraw gives up an order a queue dead-lettered and the operator
// discarded: if the database does not have it, its cancelled row goes in
// (CancelDiscarded) with a pending release, and its unit back to the live
// store, once — the path every cancellation's unit takes. false: the
// database has a row with its id already (persisted, or cancelled before):
// nothing changed.
func (l *Lifecycle) Withdraw(ctx context.Context, o Order) (bool, error) {
	won, err := l.store.CancelQueued(ctx, o, CancelDiscarded, l.now())
	if err != nil || !won {
		return false, err
	}
	l.obs.Cancelled(CancelDiscarded)
	o.Status, o.CancelReason = StatusCancelled, CancelDiscarded
	l.Release(context.WithoutCancel(ctx), o)
	return true, nil
}

// Duties is the sweep, to run on every instance (the database arbitrates
// between them).
func (l *Lifecycle) Duties() []Duty {
	return []Duty{{Name: "order expiry sweep", Every: l.cfg.SweepEvery, Do: l.Sweep}}
}

type nopLifecycleObserver struct{}

func (nopLifecycleObserver) Cancelled(CancelReason) {}
func (nopLifecycleObserver) UnitReturned()          {}

// Deadlines is the delayed path of expiry: the live store records each
// reservation's payment deadline in its own atomic step, and hands out
// those due, each once, whether the order is persisted yet or still
// queued. (The database's sweep is the safety net for what it lost.)
type Deadlines interface {
	// ClaimDue hands out up to max reservations due by now (PayBy set),
	// each once, whichever instance asks.
	ClaimDue(ctx context.Context, now time.Time, max int) ([]Order, error)
}
