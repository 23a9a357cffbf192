package core

import (
	"errors"
	"fmt"
	"time"
)

// Code is the machine-readable kind of a failure. The values are the error
// codes of the HTTP contract, so a caller branches on the kind, never on text.
type Code string

const (
	CodeBadRequest   Code = "bad_request"
	CodeUnauthorized Code = "unauthorized"
	CodeBadCode      Code = "bad_code"
	// CodePhoneNotAllowed: login codes do not go to this number (not a
	// mobile number of the allowed regions).
	CodePhoneNotAllowed Code = "phone_not_allowed"
	CodeRateLimited     Code = "rate_limited"
	CodeVoucherNotFound Code = "voucher_not_found"
	CodeNotStarted      Code = "not_started"
	// CodeNotAdmitted: a seckill on a voucher sold through a waiting room,
	// without a valid admission of the shopper's.
	CodeNotAdmitted Code = "not_admitted"
	// CodePuzzleRequired: a join of a room that asks a proof of work,
	// without a valid solution (SECKILL_ROOM_POW_BITS).
	CodePuzzleRequired Code = "pow_required"
	CodeEnded          Code = "ended"
	// CodePaused: an operator paused the sale (or the kill switch holds).
	CodePaused Code = "paused"
	// CodeNotSupported: the backend cannot do what was asked (consumers
	// to pause under sync, which has none).
	CodeNotSupported Code = "not_supported"
	// CodeNotEnoughStock: an operator asked to take more units than
	// remain (sold units are never taken back).
	CodeNotEnoughStock Code = "not_enough_stock"
	// CodeAlreadyBegun: a change only allowed before the sale (or its
	// room) begins.
	CodeAlreadyBegun     Code = "already_begun"
	CodeSoldOut          Code = "sold_out"
	CodeAlreadyPurchased Code = "already_purchased"
	CodeOrderNotFound    Code = "order_not_found"
	// CodeDeadLetterNotFound: no dead letter has that id.
	CodeDeadLetterNotFound Code = "dead_letter_not_found"
	CodeBusy               Code = "busy"
	// CodeUnconfirmed: reserved, but the replicas did not confirm it in
	// time (the replica-confirmed mode); the error carries the order id.
	CodeUnconfirmed Code = "unconfirmed"
	CodeNotReady    Code = "not_ready"
	// CodeNotReconcilable: an operator's reconcile refused, because the
	// backend cannot list the orders it holds while it holds some.
	CodeNotReconcilable Code = "not_reconcilable"
	// CodeNotCancellable: the order is paid, cancelled already, or still
	// queued.
	CodeNotCancellable Code = "not_cancellable"
	// CodeNotPayable: the order is queued, paid or cancelled.
	CodeNotPayable Code = "not_payable"
	// CodeNotRefundable: a refund of an order that has no money taken
	// to give back (not paid, or refunded already), or of more than it
	// has.
	CodeNotRefundable Code = "not_refundable"
	// CodePaymentsDisabled: no payment provider is configured.
	CodePaymentsDisabled Code = "payments_disabled"
	// CodeBadSignature: a payment notification that does not verify.
	CodeBadSignature Code = "bad_signature"
	// CodeUnavailable is a dependency (Redis, the database) that failed.
	CodeUnavailable Code = "unavailable"
	// CodeInternal is a bug; its message is never shown to a client.
	CodeInternal Code = "internal"
)

// Codes lists every Code, for documentation checks.
var Codes = []Code{
	CodeBadRequest, CodeUnauthorized, CodeBadCode, CodeRateLimited, CodeVoucherNotFound,
	CodeNotStarted, CodeEnded, CodeSoldOut, CodeAlreadyPurchased, CodeOrderNotFound,
	CodeBusy, CodeUnconfirmed, CodeNotReady, CodeNotReconcilable, CodeNotCancellable,
	CodeNotPayable, CodePaymentsDisabled, CodeBadSignature, CodeUnavailable, CodeInternal,
	CodePhoneNotAllowed, CodeDeadLetterNotFound, CodeNotAdmitted, CodePuzzleRequired,
	CodePaused, CodeNotSupported, CodeAlreadyBegun, CodeNotEnoughStock, CodeNotRefundable,
}

// Error carries a Code, a message fit for a client, the operation that
// failed and, optionally, the cause (which is for logs, not for clients).
type Error struct {
	Code    Code
	Op      string
	Message string
	Err     error
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = string(e.Code)
	}
	switch {
	case e.Op != "" && e.Err != nil:
		return fmt.Sprintf("%s: %s: %v", e.Op, msg, e.Err)
	case e.Op != "":
		return e.Op + ": " + msg
	case e.Err != nil:
		return msg + ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrSoldOut) true for any *Error of the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code && t.Op == "" && t.Err == nil
	}
	return false
}

// E builds an *Error of the given code with a client-facing message.
func E(code Code, message string) *Error { return &Error{Code: code, Message: message} }

// OpDecodeJSON is the Op of an Error whose Err is a JSON body's decoding
// error: the HTTP layer says what is wrong with the body in the client's
// terms (core knows no HTTP, nor how a body is worded to a client).
const OpDecodeJSON = "decode JSON"

// Wrap marks err as a failure of op, keeping err's code if it has one and
// otherwise classing it as code.
func Wrap(op string, code Code, err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return &Error{Code: ce.Code, Op: op, Message: ce.Message, Err: err}
	}
	return &Error{Code: code, Op: op, Err: err}
}

// CodeOf returns the Code carried by err, or CodeInternal.
func CodeOf(err error) Code {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return CodeInternal
}

// MessageOf returns the client-facing message of err; causes are never
// included, so no SQL or Redis text reaches a client.
func MessageOf(err error) string {
	var ce *Error
	if errors.As(err, &ce) && ce.Message != "" {
		return ce.Message
	}
	switch CodeOf(err) {
	case CodeUnavailable:
		return "a dependency is unavailable, try again"
	case CodeInternal:
		return "internal error"
	}
	return string(CodeOf(err))
}

// Sentinel errors for the outcomes of a seckill and of look-ups.
var (
	ErrVoucherNotFound  = E(CodeVoucherNotFound, "voucher not found")
	ErrNotStarted       = E(CodeNotStarted, "the sale has not started")
	ErrEnded            = E(CodeEnded, "the sale has ended")
	ErrPaused           = E(CodePaused, "the sale is paused: try again later")
	ErrSoldOut          = E(CodeSoldOut, "sold out")
	ErrAlreadyPurchased = E(CodeAlreadyPurchased, "you already have an order for this voucher")
	ErrOrderNotFound    = E(CodeOrderNotFound, "order not found")
	ErrBusy             = E(CodeBusy, "too many orders in flight, retry shortly")
	// ErrNotCancellable: the order is paid or cancelled already, or still
	// being recorded (queued).
	ErrNotCancellable = E(CodeNotCancellable, "the order can no longer be cancelled (paid or cancelled already), or is still being recorded: look at its status")
	// ErrDeadlinePassed: the request's deadline passed before its
	// reservation ran; nothing was reserved.
	ErrDeadlinePassed = E(CodeUnavailable, "the request's deadline passed before the reservation ran; nothing was reserved, try again")
)

// UnconfirmedError is a reservation made but not confirmed by the replicas
// in time: a failover now could lose it, or not. The order endpoints tell
// which, by OrderID.
type UnconfirmedError struct {
	OrderID int64
}

func (e *UnconfirmedError) Error() string {
	return "reserved, but not confirmed by the replicas in time; the order endpoints tell its outcome"
}

// Code lets CodeOf and MessageOf see it as CodeUnconfirmed.
func (e *UnconfirmedError) Unwrap() error {
	return &Error{Code: CodeUnconfirmed, Message: e.Error()}
}

// AlreadyPurchasedError is a shopper who already holds an order of the
// voucher; OrderID is that order, so a shopper whose first answer was lost
// (a timeout, a retry) learns it. errors.Is(err, ErrAlreadyPurchased) holds.
type AlreadyPurchasedError struct {
	OrderID int64
}

func (e *AlreadyPurchasedError) Error() string { return ErrAlreadyPurchased.Message }

// Unwrap lets CodeOf, MessageOf and errors.Is see ErrAlreadyPurchased.
func (e *AlreadyPurchasedError) Unwrap() error { return ErrAlreadyPurchased }

// StatusUnreadError is a shopper's order the live store names but whose
// status cannot be read now (the database is unavailable, and the queue
// does not hold it: it was persisted, and only the database knows whether
// it is unpaid, paid or cancelled). The answer is unavailable, but carries
// OrderID: the fault run's shoppers read a bare 503 for an order Redis
// named.
type StatusUnreadError struct {
	OrderID int64
	Err     error
}

func (e *StatusUnreadError) Error() string {
	return "your order is known, but its status cannot be read now: try again in a moment"
}

// Unwrap lets CodeOf and MessageOf see it as CodeUnavailable.
func (e *StatusUnreadError) Unwrap() error {
	return &Error{Code: CodeUnavailable, Message: e.Error(), Err: e.Err}
}

// HeldOrderOf is the order id an error carries for the shopper (already
// purchased, unconfirmed, its status unread), if any.
func HeldOrderOf(err error) (int64, bool) {
	var unread *StatusUnreadError
	if errors.As(err, &unread) {
		return unread.OrderID, true
	}
	var ap *AlreadyPurchasedError
	if errors.As(err, &ap) && ap.OrderID != 0 {
		return ap.OrderID, true
	}
	var uc *UnconfirmedError
	if errors.As(err, &uc) {
		return uc.OrderID, true
	}
	return 0, false
}

// RateLimitedError is a shopper over the seckill limit, refused by the
// reservation itself; RetryAfter is when the next attempt is admitted.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return "too many requests, retry later" }

// Unwrap lets CodeOf and MessageOf see it as CodeRateLimited.
func (e *RateLimitedError) Unwrap() error {
	return &Error{Code: CodeRateLimited, Message: e.Error()}
}
