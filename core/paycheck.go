package core

import (
	"context"
	"time"
)

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
func (p *Payments) Ask(ctx context.Context, pay Payment) (res NoticeResult, word ProviderPayment, err error) {
	if p.provider == nil {
		return "", ProviderPayment{}, ErrPaymentsDisabled
	}
	word, err = p.provider.Status(ctx, pay)
	if err != nil {
		return "", word, Wrap("payment status: provider", CodeUnavailable, err)
	}
	if err := p.store.Heard(ctx, pay.ID, word, p.now()); err != nil {
		return "", word, Wrap("payment status: record", CodeUnavailable, err)
	}
	n := PaymentNotice{Provider: p.name, PaymentID: pay.ID, OrderID: pay.OrderID, Amount: word.Taken, TxnID: word.TxnID}
	switch {
	case word.Taken > 0 && word.TxnID != "":
		// Taken, and perhaps given back since (a refund the shop asked
		// for, by this very transaction): the record decides which.
		n.Succeeded = true
	case word.State == PaymentFailed && word.TxnID != "":
		n.Amount = pay.Amount
	default:
		return "", word, nil // pending: nothing to record yet
	}
	res, err = p.carryOut(ctx, n)
	return res, word, err
}

// BeforeExpiry asks the provider about the payments of an order about to
// expire that the shop has no word on: money taken by the order's
// deadline makes it paid (true), even if its notice never comes. Money
// taken after it is left to the reconciliation, which refunds it once the
// order is cancelled. An error holds the expiry (the provider did not
// answer) for at most ExpiryHold past the deadline.
func (p *Payments) BeforeExpiry(ctx context.Context, orderID int64) (bool, error) {
	if p.provider == nil {
		return false, nil
	}
	open, err := p.store.OpenPayments(ctx, orderID)
	if err != nil {
		return false, Wrap("before expiry: payments", CodeUnavailable, err)
	}
	for _, pay := range open {
		word, err := p.provider.Status(ctx, pay)
		if err == nil {
			err = p.store.Heard(ctx, pay.ID, word, p.now())
		}
		if err != nil {
			if p.now().Before(pay.PayBy.Add(ExpiryHold)) {
				return false, Wrap("before expiry: provider", CodeUnavailable, err)
			}
			p.log.Warn("an order expires although the payment provider did not say whether it took the money: the reconciliation refunds what it took",
				"order", orderID, "payment", pay.ID, "err", err)
			continue
		}
		if word.Taken == 0 || word.TxnID == "" || word.TakenAt.After(pay.PayBy) {
			continue
		}
		res, err := p.carryOut(ctx, PaymentNotice{Provider: p.name, PaymentID: pay.ID, OrderID: pay.OrderID,
			Amount: word.Taken, Succeeded: true, TxnID: word.TxnID})
		if err != nil {
			return false, err
		}
		if res == NoticePaid {
			p.log.Info("the provider took the money before the deadline and its notice had not come: the order is paid", "order", orderID, "payment", pay.ID)
		}
		if res == NoticePaid || res == NoticeAlreadyRecorded {
			return true, nil
		}
	}
	return false, nil
}

// Refund asks the provider for money back (refund.Provider):
// ErrPaymentsDisabled without one.
func (p *Payments) Refund(ctx context.Context, r RefundRequest) error {
	if p.provider == nil {
		return ErrPaymentsDisabled
	}
	return p.provider.Refund(ctx, r)
}
