// Package refund is an operator's refunds of paid orders: one order, or
// many at once (a scalper sweep, a mispriced sale), through the payment
// provider, each refunded once whoever asks how often, optionally with
// its unit back on sale exactly once, and recorded as an operator's
// action.
//
// The database is the arbiter, as for every transition of an order: a
// refund begins with a conditional update of the order from paid to
// refunding (two operators at once: one wins), in the transaction that
// records the action and — with its unit — gives the unit back to the
// stock column and records a pending release (the lifecycle's sweep gives
// Redis the unit, as for a cancellation). The provider's refund follows,
// keyed by the order, so asking it again is one refund; then the order is
// refunded. An instance that dies between is finished by any other
// (Duty).
package refund

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Request is one order to refund.
type Request struct {
	OrderID int64
	// ReturnUnit puts the order's unit back on sale; else it stays sold.
	ReturnUnit bool
	// Operator, Fingerprint and Note are the action's record.
	Operator, Fingerprint, Note string
}

// Begun is a refund under way: the order (refunding now), and the payment
// that paid it.
type Begun struct {
	Request
	Order   core.Order
	Payment core.Payment
}

// Batch is what a Begin did: the refunds it began, and the orders it left
// with why (ErrUnderWay, ErrNotPaid or core.ErrOrderNotFound).
type Batch struct {
	Begun []Begun
	Left  map[int64]error
}

// Store is the database's side. A sweep's refunds are begun and finished
// a batch at a time: a refund with its unit moves the voucher's stock
// column, one row every refund of a voucher waits on, so one transaction
// for a batch, not one each, is what lets thousands go within seconds.
type Store interface {
	// Begin makes the paid orders among ids refunding (each as r asks),
	// in one transaction with the actions' records and, with
	// r.ReturnUnit, the units back to the stock column and pending
	// releases.
	Begin(ctx context.Context, r Request, ids []int64, at time.Time) (Batch, error)
	// Finish records the provider's refunds made: the orders refunded.
	Finish(ctx context.Context, b []Begun, at time.Time) error
	// Unfinished lists refunds begun before `before` and not finished.
	Unfinished(ctx context.Context, before time.Time, limit int) ([]Begun, error)
	// Match lists the paid orders a sweep names.
	Match(ctx context.Context, s Sweep, limit int) ([]int64, error)
}

// Provider refunds at the payment provider (core.PaymentProvider's).
type Provider interface {
	Refund(ctx context.Context, r core.RefundRequest) error
}

// Releaser gives units back to the live store now (core.Lifecycle's
// Release); the lifecycle's sweep re-drives one that did not happen.
type Releaser interface {
	Release(ctx context.Context, orders ...core.Order)
}

var (
	// ErrNotPaid: the order is not paid: nothing to refund.
	ErrNotPaid = core.E(core.CodeNotRefundable, "the order is not paid: there is no money to give back")
	// ErrUnderWay: the order is refunding or refunded already.
	ErrUnderWay = errors.New("refund: under way or done already")
)

// Config is what the refunds are made of.
type Config struct {
	Store    Store
	Provider Provider
	Releaser Releaser
	Log      *slog.Logger
}

// Refunds carries out refunds.
type Refunds struct {
	cfg Config
	now func() time.Time
}

// New builds the refunds; it panics without a Store, a Provider or a
// Releaser.
func New(cfg Config) *Refunds {
	if cfg.Store == nil || cfg.Provider == nil || cfg.Releaser == nil {
		panic("refund: New needs a Store, a Provider and a Releaser")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Refunds{cfg: cfg, now: time.Now}
}

// Refund refunds one paid order. An order refunding or refunded already
// answers as done (false: this call did not begin it).
func (r *Refunds) Refund(ctx context.Context, req Request) (began bool, err error) {
	batch, err := r.cfg.Store.Begin(ctx, req, []int64{req.OrderID}, r.now())
	if err != nil {
		return false, core.Wrap("refund: begin", core.CodeUnavailable, err)
	}
	if why := batch.Left[req.OrderID]; why != nil {
		if errors.Is(why, ErrUnderWay) {
			return false, nil
		}
		return false, why
	}
	if len(batch.Begun) != 1 {
		return false, core.E(core.CodeInternal, "refund: the store began no refund and said nothing of why")
	}
	b := batch.Begun[0]
	if req.ReturnUnit {
		r.cfg.Releaser.Release(context.WithoutCancel(ctx), b.Order)
	}
	if err := r.giveBack(ctx, b); err != nil {
		// Begun: the duty finishes it.
		return true, core.Wrap("refund: the provider", core.CodeUnavailable, err)
	}
	if err := r.cfg.Store.Finish(ctx, batch.Begun, r.now()); err != nil {
		return true, core.Wrap("refund: finish", core.CodeUnavailable, err)
	}
	return true, nil
}

// giveBack makes the provider's refund, keyed by the order: one refund
// however often asked.
func (r *Refunds) giveBack(ctx context.Context, b Begun) error {
	key := "order-refund:" + strconv.FormatInt(b.Order.ID, 10)
	return r.cfg.Provider.Refund(ctx, core.RefundRequest{PaymentID: b.Payment.ID, OrderID: b.Order.ID,
		Amount: b.Payment.Amount, Key: key})
}

// finishAfter is how old a begun refund is before any instance finishes
// it: its own, alive, is done in well under a second.
const finishAfter = 5 * time.Second

// Duty finishes the refunds left begun (their instance died between the
// halves, or the provider did not answer), every second on every instance:
// each provider's refund is keyed, so two finishing one is one refund.
func (r *Refunds) Duty() core.Duty {
	return core.Duty{Name: "refunds: finish those begun", Every: time.Second, Do: r.finishBegun}
}

func (r *Refunds) finishBegun(ctx context.Context) error {
	begun, err := r.cfg.Store.Unfinished(ctx, r.now().Add(-finishAfter), 100)
	if err != nil {
		return err
	}
	given, failed := r.giveBackAll(ctx, begun)
	if len(given) > 0 {
		if err := r.cfg.Store.Finish(ctx, given, r.now()); err != nil {
			return err
		}
		r.cfg.Log.Warn("refund: finished refunds their instance left begun", "orders", len(given))
	}
	if failed > 0 {
		return fmt.Errorf("refund: the provider refunded %d of %d begun refunds", len(given), len(begun))
	}
	return nil
}

// providerCalls is how many refunds a batch asks of the provider at once:
// each is a call over the network, and a provider limits a shop's calls.
const providerCalls = 8

// giveBackAll makes the provider's refunds of begun, a few at once: those
// it made, and how many it could not.
func (r *Refunds) giveBackAll(ctx context.Context, begun []Begun) (given []Begun, failed int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, providerCalls)
	for _, b := range begun {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := r.giveBack(ctx, b)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				r.cfg.Log.Warn("refund: the provider did not refund now; the duty asks again", "order", b.Order.ID, "err", err)
				return
			}
			given = append(given, b)
		})
	}
	wg.Wait()
	return given, failed
}
