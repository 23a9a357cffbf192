// Package payreconcile is the payments' reconciliation: the provider's
// word decides, not whether its notice arrived. A duty, on one instance at
// a time, asks the provider about every payment it has said nothing final
// of some time after the payment started, at a rate the provider allows,
// and records the answer as the notice would have been recorded: money
// taken makes the order paid, or — the order cancelled first (expired,
// say) — refunded through the provider, never kept.
package payreconcile

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/time/rate"

	"github.com/seckill-lab/seckill/core"
)

// Store lists the payments to ask about.
type Store interface {
	// Unsettled lists payments the provider has said nothing final of
	// (pending or failed), started between since and before and not asked
	// about since before, the longest unasked first.
	Unsettled(ctx context.Context, since, before time.Time, limit int) ([]core.Payment, error)
	// AfterSale lists payments of sales that ended between since and
	// before, not asked about since their sale ended.
	AfterSale(ctx context.Context, since, before time.Time, limit int) ([]core.Payment, error)
}

// Asker asks the provider about a payment and carries out its word
// (payments.Service.Ask).
type Asker interface {
	Ask(ctx context.Context, p core.Payment) (core.NoticeResult, core.ProviderPayment, error)
}

// Locker keeps the duty on one instance at a time.
type Locker interface {
	Lock(ctx context.Context, name string, ttl time.Duration) (release func(), err error)
}

// Observer counts what the rounds found.
type Observer interface {
	// Reconciled is told of each payment asked about: what its word did
	// ("" while the provider says nothing yet), or that asking failed.
	Reconciled(res core.NoticeResult, failed bool)
}

// Config is what the reconciliation is made of; zero values take the
// defaults.
type Config struct {
	Store  Store
	Asker  Asker
	Locker Locker
	// After: a payment is asked about once it is this old, and again this
	// long after each time it was asked (default 30 s).
	After time.Duration
	// Horizon: payments older than this are no longer asked about by the
	// rounds (default 24 h).
	Horizon time.Duration
	// PerSecond bounds the questions to the provider (default 20).
	PerSecond float64
	Observer  Observer
	Log       *slog.Logger
}

// Reconciler runs the rounds.
type Reconciler struct {
	cfg     Config
	limiter *rate.Limiter
	now     func() time.Time
}

// Defaults.
const (
	DefaultAfter     = 30 * time.Second
	DefaultHorizon   = 24 * time.Hour
	DefaultPerSecond = 20
	// roundBatch bounds one round's payments; lockName is the duty's lock.
	roundBatch = 200
	lockName   = "payments:reconcile"
)

// New builds the reconciliation; it panics without a Store, an Asker or a
// Locker.
func New(cfg Config) *Reconciler {
	if cfg.Store == nil || cfg.Asker == nil || cfg.Locker == nil {
		panic("payreconcile: New needs a Store, an Asker and a Locker")
	}
	if cfg.After <= 0 {
		cfg.After = DefaultAfter
	}
	if cfg.Horizon <= 0 {
		cfg.Horizon = DefaultHorizon
	}
	if cfg.PerSecond <= 0 {
		cfg.PerSecond = DefaultPerSecond
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{cfg: cfg, limiter: rate.NewLimiter(rate.Limit(cfg.PerSecond), 1), now: time.Now}
}

// Duty is the rounds, every second; each instance runs it, one at a time
// does a round.
func (r *Reconciler) Duty() core.Duty {
	return core.Duty{Name: "payments: reconcile with the provider", Every: time.Second, Do: r.Round}
}

// Round asks about the payments due, if no other instance is doing so. It
// holds the duty's lock for as long as a full batch may take at the rate.
func (r *Reconciler) Round(ctx context.Context) error {
	try, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	hold := time.Duration(float64(roundBatch)/r.cfg.PerSecond*float64(time.Second)) + 10*time.Second
	release, err := r.cfg.Locker.Lock(try, lockName, hold)
	cancel()
	if err != nil {
		return nil // another instance's round
	}
	defer release()
	now := r.now()
	due, err := r.due(ctx, now)
	if err != nil {
		return err
	}
	failed, first := 0, error(nil)
	for _, p := range due {
		if err := r.limiter.Wait(ctx); err != nil {
			return nil // stopping
		}
		res, word, err := r.cfg.Asker.Ask(ctx, p)
		r.cfg.Observer.Reconciled(res, err != nil)
		if err != nil {
			if failed++; first == nil {
				first = err
			}
			continue
		}
		if res == core.NoticePaid || res == core.NoticeRefunded {
			r.cfg.Log.Info("reconciled a payment whose notice never came", "payment", p.ID, "order", p.OrderID,
				"result", res, "taken", word.Taken, "taken_at", word.TakenAt)
		}
	}
	if failed > 0 {
		return fmt.Errorf("reconcile payments: %d of %d not asked: %w", failed, len(due), first)
	}
	return nil
}

// due are a round's payments: those unsettled, then — room left — those
// of sales ended at least After ago (a notice of the last moment has had
// its time) not asked about since.
func (r *Reconciler) due(ctx context.Context, now time.Time) ([]core.Payment, error) {
	due, err := r.cfg.Store.Unsettled(ctx, now.Add(-r.cfg.Horizon), now.Add(-r.cfg.After), roundBatch)
	if err != nil {
		return nil, core.Wrap("reconcile payments: list", core.CodeUnavailable, err)
	}
	if len(due) == roundBatch {
		return due, nil
	}
	after, err := r.cfg.Store.AfterSale(ctx, now.Add(-r.cfg.Horizon), now.Add(-r.cfg.After), roundBatch-len(due))
	if err != nil {
		return nil, core.Wrap("reconcile payments: list", core.CodeUnavailable, err)
	}
	seen := make(map[string]bool, len(due))
	for _, p := range due {
		seen[p.ID] = true
	}
	for _, p := range after {
		if !seen[p.ID] {
			due = append(due, p)
		}
	}
	return due, nil
}

type nopObserver struct{}

func (nopObserver) Reconciled(core.NoticeResult, bool) {}
