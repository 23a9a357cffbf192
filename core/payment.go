package core

import (
	"context"
	"time"
)

// Paying for an order: the shopper is sent to a payment provider, which
// later tells the shop, asynchronously and possibly more than once, what
// became of the payment. The database is the arbiter again: a succeeded
// notice makes an unpaid order paid with a conditional update, so of pay,
// cancel and expiry exactly one wins; one for an order cancelled meanwhile
// never makes it paid (the money goes back: refunded); and every notice is
// recorded once, by the provider's transaction id.

// Payment is one attempt to pay an order.
type Payment struct {
	// ID is the shop's id of the attempt; Provider the provider's name.
	ID       string
	Provider string
	OrderID  int64
	// Amount in minor units, the voucher's payValue.
	Amount int64
	// PayBy is the order's deadline (where read with the payment).
	PayBy time.Time
}

// PaymentNotice is what a provider reports of a payment.
type PaymentNotice struct {
	Provider  string
	PaymentID string
	OrderID   int64
	Amount    int64
	Succeeded bool
	// TxnID is the provider's transaction id: notices are recorded once
	// each.
	TxnID string
}

// NoticeResult is what recording a notice did.
type NoticeResult string

const (
	// NoticePaid: the order is paid.
	NoticePaid NoticeResult = "paid"
	// NoticeAlreadyRecorded: this transaction was recorded before.
	NoticeAlreadyRecorded NoticeResult = "already_recorded"
	// NoticeRefunded: the order was cancelled (or paid by another
	// transaction) first; this payment's money goes back.
	NoticeRefunded NoticeResult = "refunded"
	// NoticeFailed: the payment failed; the order is as it was.
	NoticeFailed NoticeResult = "failed"
)

// PaymentState is the provider's word on a payment, and the shop's record
// of it.
type PaymentState string

const (
	// PaymentPending: started, and nothing known of it yet.
	PaymentPending PaymentState = "pending"
	// PaymentSucceeded: the provider took the money.
	PaymentSucceeded PaymentState = "succeeded"
	// PaymentFailed: the provider took nothing (the shopper may try again
	// on the same payment).
	PaymentFailed PaymentState = "failed"
	// PaymentRefunded: the money taken went back.
	PaymentRefunded PaymentState = "refunded"
)

// ProviderPayment is what the provider says of a payment when asked: its
// word, whatever became of its notices.
type ProviderPayment struct {
	State   PaymentState
	OrderID int64
	// Amount is the payment's (minor units); Taken what the provider
	// took of it, at TakenAt, by the transaction TxnID (the id its notice
	// carries; the failed attempt's, for a failure).
	Amount, Taken int64
	TakenAt       time.Time
	TxnID         string
	// Refunded is what it gave back, in Refunds.
	Refunded int64
	Refunds  []ProviderRefund
}

// ProviderRefund is one refund the provider made.
type ProviderRefund struct {
	Amount int64
	At     time.Time
}

// RefundRequest asks the provider for money back: one refund per Key,
// however often it is asked.
type RefundRequest struct {
	PaymentID string
	OrderID   int64
	Amount    int64
	Key       string
}

// PaymentProvider is a payment service: it starts payments, verifies its
// own notifications (each provider signs them in its own way), answers
// what became of a payment, and refunds.
type PaymentProvider interface {
	// Start begins a payment and returns where to send the shopper.
	Start(ctx context.Context, p Payment) (payURL string, err error)
	// Verify reads a notification as the provider sent it: ErrBadSignature
	// if it is not the provider's, a CodeBadRequest error if it does not
	// parse.
	Verify(ctx context.Context, body []byte, header func(string) string) (PaymentNotice, error)
	// Status asks the provider about a payment: its word decides, whether
	// or not its notice ever came.
	Status(ctx context.Context, p Payment) (ProviderPayment, error)
	// Refund gives money of a payment back, once per r.Key.
	Refund(ctx context.Context, r RefundRequest) error
}

// PaymentStore is the database's side of payments.
type PaymentStore interface {
	// StartPayment records a payment of an unpaid order of owner's, its
	// amount the voucher's payValue. ErrOrderNotFound; ErrNotPayable.
	StartPayment(ctx context.Context, p Payment, owner int64) (Payment, error)
	// RecordNotice records a notice once by its TxnID and carries it out,
	// in one transaction: a succeeded one makes the unpaid order paid, or
	// marks it for a refund if it was cancelled (or paid) first. An
	// amount other than the payment's is a CodeBadRequest error; a
	// payment the database does not know, ErrPaymentUnknown.
	RecordNotice(ctx context.Context, n PaymentNotice, now time.Time) (NoticeResult, error)
	// Refunded records that the provider gave the money back.
	Refunded(ctx context.Context, n PaymentNotice) error
	// OpenPayments are the payments of an order the provider has not
	// said took money (pending or failed), each with the order's PayBy.
	OpenPayments(ctx context.Context, orderID int64) ([]Payment, error)
	// Heard records the provider's answer about a payment, at at.
	Heard(ctx context.Context, paymentID string, word ProviderPayment, at time.Time) error
}

var (
	// ErrNotPayable: the order is queued, paid or cancelled.
	ErrNotPayable = E(CodeNotPayable, "the order cannot be paid now (still being recorded, paid or cancelled): look at its status")
	// ErrPaymentsDisabled: no payment provider is configured.
	ErrPaymentsDisabled = E(CodePaymentsDisabled, "payments are not enabled on this shop")
	// ErrBadSignature: a notification that is not the provider's.
	ErrBadSignature = E(CodeBadSignature, "the notification's signature does not verify")
	// ErrPaymentUnknown: a notice for a payment the shop has no record of
	// (yet): the provider is answered so that it retries.
	ErrPaymentUnknown = E(CodeUnavailable, "no such payment recorded yet; retry")
)
