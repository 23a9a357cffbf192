// Package payments is paying for orders: the shopper is sent to a payment
// provider, whose word — its notice, or its answer when asked — decides
// what became of the payment; the database records each word once, by the
// provider's transaction id (core.PaymentStore), and is the arbiter of the
// order's transitions.
package payments

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Service pays orders through one provider, and asks it.
type Service struct {
	name     string
	provider core.PaymentProvider
	store    core.PaymentStore
	log      *slog.Logger
	now      func() time.Time
}

// Config is what the service is built over.
type Config struct {
	// Name is the provider's registered name; Provider nil disables
	// payments.
	Name     string
	Provider core.PaymentProvider
	Store    core.PaymentStore
	// Log is told what the provider's answers changed (nil: nothing).
	Log *slog.Logger
}

// New builds the service.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{name: cfg.Name, provider: cfg.Provider, store: cfg.Store, log: cfg.Log, now: time.Now}
}

// Provider is the name of the provider payments go through ("" when
// disabled).
func (p *Service) Provider() string {
	if p.provider == nil {
		return ""
	}
	return p.name
}

// Pay starts the payment of userID's unpaid order.
func (p *Service) Pay(ctx context.Context, userID, orderID int64) (_ core.Payment, _ string, err error) {
	if p.provider == nil {
		return core.Payment{}, "", core.ErrPaymentsDisabled
	}
	id := make([]byte, 12)
	rand.Read(id)
	pay, err := p.store.StartPayment(ctx, core.Payment{ID: hex.EncodeToString(id), Provider: p.name, OrderID: orderID}, userID)
	if err != nil {
		if errors.Is(err, core.ErrOrderNotFound) || errors.Is(err, core.ErrNotPayable) {
			return core.Payment{}, "", err
		}
		return core.Payment{}, "", core.Wrap("start payment", core.CodeUnavailable, err)
	}
	url, err := p.provider.Start(ctx, pay)
	if err != nil {
		return core.Payment{}, "", core.Wrap("start payment: provider", core.CodeUnavailable, err)
	}
	return pay, url, nil
}

// Notify verifies and records a provider's notification. A refund it
// calls for is made before the answer, so a provider that gets no 200
// asks again and the refund is retried; a refund done already is recorded
// as such and not repeated.
func (p *Service) Notify(ctx context.Context, provider string, body []byte, header func(string) string) (_ core.NoticeResult, err error) {
	if p.provider == nil || provider != p.name {
		return "", core.E(core.CodeBadRequest, "no such payment provider here")
	}
	n, err := p.provider.Verify(ctx, body, header)
	if err != nil {
		return "", err
	}
	n.Provider = p.name
	return p.carryOut(ctx, n)
}

// carryOut records a notice — sent, or read from the provider's answer to
// a status query — and makes the refund it calls for.
func (p *Service) carryOut(ctx context.Context, n core.PaymentNotice) (core.NoticeResult, error) {
	res, err := p.store.RecordNotice(ctx, n, p.now())
	if err != nil {
		return "", err
	}
	if res == core.NoticeRefunded {
		// Keyed by the transaction: a refund asked again (the provider's
		// retried notice, a crash before it was recorded) is one refund.
		r := core.RefundRequest{PaymentID: n.PaymentID, OrderID: n.OrderID, Amount: n.Amount, Key: "txn:" + n.TxnID}
		if err := p.provider.Refund(ctx, r); err != nil {
			return "", core.Wrap("refund", core.CodeUnavailable, err)
		}
		if err := p.store.Refunded(ctx, n); err != nil {
			return "", core.Wrap("refund: record", core.CodeUnavailable, err)
		}
	}
	return res, nil
}

// Asking the provider: its word decides, not whether its notice arrived.
// A payment's notice may be lost, late or doubled; before an order with a
// payment the shop has no word on expires, and on the reconciliation
// duty's rounds, the shop asks, and records the answer as the notice would
// have been recorded (by the same transaction id, so a notice that comes
// after all changes nothing).

// ExpiryHold is how long past its deadline an order whose payment the
// provider did not answer about waits for it before it expires anyway: a
// provider's outage must not hold the sale's units for ever, and money
// taken meanwhile is refunded by the reconciliation.
const ExpiryHold = time.Minute

// Ask asks the provider about a payment and carries out its word: money
// taken makes the order paid (or, cancelled first, refunded), a failure is
// recorded; a payment still pending changes nothing (""). word is what the
// provider said.
func (p *Service) Ask(ctx context.Context, pay core.Payment) (res core.NoticeResult, word core.ProviderPayment, err error) {
	if p.provider == nil {
		return "", core.ProviderPayment{}, core.ErrPaymentsDisabled
	}
	word, err = p.provider.Status(ctx, pay)
	if err != nil {
		return "", word, core.Wrap("payment status: provider", core.CodeUnavailable, err)
	}
	if err := p.store.Heard(ctx, pay.ID, word, p.now()); err != nil {
		return "", word, core.Wrap("payment status: record", core.CodeUnavailable, err)
	}
	n := core.PaymentNotice{Provider: p.name, PaymentID: pay.ID, OrderID: pay.OrderID, Amount: word.Taken, TxnID: word.TxnID}
	switch {
	case word.Taken > 0 && word.TxnID != "":
		// Taken, and perhaps given back since (a refund the shop asked
		// for, by this very transaction): the record decides which. The
		// word names its first charge, of the payment's amount (a second
		// one the provider made is money the shop hears of by its notice).
		n.Succeeded, n.Amount = true, pay.Amount
	case word.State == core.PaymentFailed && word.TxnID != "":
		n.Amount = pay.Amount
	default:
		return "", word, nil // pending: nothing to record yet
	}
	res, err = p.carryOut(ctx, n)
	return res, word, err
}

// AskingBeforeExpiry is store, whose expiries first ask the provider
// (BeforeExpiry): an order it says is paid, or whose payment it has not
// answered about, is not cancellable yet — not due while the provider has
// not said; the next sweep asks again. Other cancellations pass through.
func (p *Service) AskingBeforeExpiry(store core.LifecycleStore) core.LifecycleStore {
	return expiryAsking{LifecycleStore: store, payments: p}
}

type expiryAsking struct {
	core.LifecycleStore
	payments *Service
}

func (e expiryAsking) CancelOrder(ctx context.Context, orderID, owner int64, reason core.CancelReason, now time.Time) (core.Order, error) {
	if reason == core.CancelExpired {
		paid, err := e.payments.BeforeExpiry(ctx, orderID)
		if err != nil {
			e.payments.log.Warn("expiry held until the next sweep: the payment provider did not say whether the order was paid", "order", orderID, "err", err)
		}
		if err != nil || paid {
			return core.Order{}, core.ErrNotCancellable
		}
	}
	return e.LifecycleStore.CancelOrder(ctx, orderID, owner, reason, now)
}

// BeforeExpiry asks the provider about the payments of an order about to
// expire that the shop has no word on: money taken by the order's
// deadline makes it paid (true), even if its notice never comes. Money
// taken after it is left to the reconciliation, which refunds it once the
// order is cancelled. An error holds the expiry (the provider did not
// answer) for at most ExpiryHold past the deadline.
func (p *Service) BeforeExpiry(ctx context.Context, orderID int64) (bool, error) {
	if p.provider == nil {
		return false, nil
	}
	open, err := p.store.OpenPayments(ctx, orderID)
	if err != nil {
		return false, core.Wrap("before expiry: payments", core.CodeUnavailable, err)
	}
	for _, pay := range open {
		word, err := p.provider.Status(ctx, pay)
		if err == nil {
			err = p.store.Heard(ctx, pay.ID, word, p.now())
		}
		if err != nil {
			if p.now().Before(pay.PayBy.Add(ExpiryHold)) {
				return false, core.Wrap("before expiry: provider", core.CodeUnavailable, err)
			}
			p.log.Warn("an order expires although the payment provider did not say whether it took the money: the reconciliation refunds what it took",
				"order", orderID, "payment", pay.ID, "err", err)
			continue
		}
		if word.Taken == 0 || word.TxnID == "" || word.TakenAt.After(pay.PayBy) {
			continue
		}
		res, err := p.carryOut(ctx, core.PaymentNotice{Provider: p.name, PaymentID: pay.ID, OrderID: pay.OrderID,
			Amount: pay.Amount, Succeeded: true, TxnID: word.TxnID})
		if err != nil {
			return false, err
		}
		if res == core.NoticePaid {
			p.log.Info("the provider took the money before the deadline and its notice had not come: the order is paid", "order", orderID, "payment", pay.ID)
		}
		if res == core.NoticePaid || res == core.NoticeAlreadyRecorded {
			return true, nil
		}
	}
	return false, nil
}

// Refund asks the provider for money back (refund.Provider):
// core.ErrPaymentsDisabled without one.
func (p *Service) Refund(ctx context.Context, r core.RefundRequest) error {
	if p.provider == nil {
		return core.ErrPaymentsDisabled
	}
	return p.provider.Refund(ctx, r)
}
