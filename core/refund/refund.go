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
	"log/slog"
	"strconv"
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

// Store is the database's side.
type Store interface {
	// Begin makes a paid order refunding, in one transaction with the
	// action's record and, with ReturnUnit, the unit back to the stock
	// column and a pending release. ErrNotPaid: the order is not paid
	// (ErrUnderWay: refunding or refunded already); core.ErrOrderNotFound.
	Begin(ctx context.Context, r Request, at time.Time) (Begun, error)
	// Finish records the provider's refund made: the order refunded.
	Finish(ctx context.Context, b Begun, at time.Time) error
	// Unfinished lists refunds begun before `before` and not finished.
	Unfinished(ctx context.Context, before time.Time, limit int) ([]Begun, error)
	// Match lists the paid orders a sweep names.
	Match(ctx context.Context, s Sweep, limit int) ([]int64, error)
}

// Provider refunds at the payment provider (core.PaymentProvider's).
type Provider interface {
	Refund(ctx context.Context, r core.RefundRequest) error
}

// Releaser gives a unit back to the live store now (core.Lifecycle's
// release); the lifecycle's sweep re-drives one that did not happen.
type Releaser interface {
	Release(ctx context.Context, o core.Order)
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
	b, err := r.cfg.Store.Begin(ctx, req, r.now())
	if errors.Is(err, ErrUnderWay) {
		return false, nil
	}
	if err != nil {
		if errors.Is(err, core.ErrOrderNotFound) || errors.Is(err, ErrNotPaid) {
			return false, err
		}
		return false, core.Wrap("refund: begin", core.CodeUnavailable, err)
	}
	if req.ReturnUnit {
		r.cfg.Releaser.Release(context.WithoutCancel(ctx), b.Order)
	}
	if err := r.finish(ctx, b); err != nil {
		// Begun: the duty finishes it.
		return true, core.Wrap("refund: the provider", core.CodeUnavailable, err)
	}
	return true, nil
}

// finish makes the provider's refund, keyed by the order (one refund
// however often asked), and records it.
func (r *Refunds) finish(ctx context.Context, b Begun) error {
	key := "order-refund:" + strconv.FormatInt(b.Order.ID, 10)
	if err := r.cfg.Provider.Refund(ctx, core.RefundRequest{PaymentID: b.Payment.ID, OrderID: b.Order.ID,
		Amount: b.Payment.Amount, Key: key}); err != nil {
		return err
	}
	return r.cfg.Store.Finish(ctx, b, r.now())
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
	for _, b := range begun {
		if err := r.finish(ctx, b); err != nil {
			return err
		}
		r.cfg.Log.Warn("refund: finished one its instance left begun", "order", b.Order.ID)
	}
	return nil
}
