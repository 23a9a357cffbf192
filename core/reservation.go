package core

import (
	"context"
	"time"
)

// ReservationResult is the outcome of the atomic reservation script.
type ReservationResult int

const (
	// Reserved: stock taken, the user recorded, the order handed to the queue.
	// A replay of the same order id also returns Reserved.
	Reserved ReservationResult = iota
	// VoucherMissing: the voucher's stock is not loaded (unknown voucher).
	VoucherMissing
	NotStarted
	Ended
	SoldOut
	// AlreadyPurchased: the user holds a different order for this voucher.
	AlreadyPurchased
	// RateLimited: the shopper is over the seckill limit for this voucher;
	// nothing was reserved (Reservation.RetryAfter says when to retry).
	RateLimited
	// DeadlinePassed: the reservation reached the live store after the
	// request's deadline (the caller had given up): nothing was reserved.
	DeadlinePassed
	// Paused: an operator (or the kill switch) paused the sale.
	Paused
)

// Err maps a refused reservation onto the contract's error; nil for Reserved.
func (r ReservationResult) Err() error {
	switch r {
	case Reserved:
		return nil
	case VoucherMissing:
		return ErrVoucherNotFound
	case NotStarted:
		return ErrNotStarted
	case Ended:
		return ErrEnded
	case SoldOut:
		return ErrSoldOut
	case AlreadyPurchased:
		return ErrAlreadyPurchased
	case RateLimited:
		return &RateLimitedError{RetryAfter: time.Second}
	case DeadlinePassed:
		return ErrDeadlinePassed
	case Paused:
		return ErrPaused
	}
	return E(CodeInternal, "unknown reservation result")
}

// Reservation is what Reserve decided. OrderID is the reserved order, or the
// order the user already holds when Result is AlreadyPurchased.
type Reservation struct {
	Result  ReservationResult
	OrderID int64
	// Unconfirmed: Reserved, but the replicas did not confirm the write in
	// time (only when the reserver waits for them).
	Unconfirmed bool
	// RetryAfter: when RateLimited, how long until the shopper is admitted.
	RetryAfter time.Duration
	// WindowEdge, on the live store's clock: when NotStarted, the time
	// until the sale opens; when Ended, the time since it closed (0: not
	// reported). AnswerMemo keeps window answers off the edges with it.
	WindowEdge time.Duration
}

// Err is the contract's error for a refused reservation (nil when
// Reserved), with its retry delay when rate limited.
func (r Reservation) Err() error {
	switch {
	case r.Result == RateLimited && r.RetryAfter > 0:
		return &RateLimitedError{RetryAfter: r.RetryAfter}
	case r.Result == AlreadyPurchased && r.OrderID != 0:
		return &AlreadyPurchasedError{OrderID: r.OrderID}
	}
	return r.Result.Err()
}

// Reserver takes stock for an order atomically: time window, stock and
// one-order-per-user are checked and the reservation made in one step.
// Reserve must be safe to run twice with the same order (clients retry).
type Reserver interface {
	Reserve(ctx context.Context, o Order) (Reservation, error)
	// Release undoes the reservation of exactly this order; releasing twice,
	// or releasing an order that was never reserved, changes nothing.
	Release(ctx context.Context, o Order) error
	// ReservedOrder is the order id the user holds for the voucher, if any.
	ReservedOrder(ctx context.Context, userID, voucherID int64) (int64, bool, error)
}

// ShopperLimit is the reserver's own limit on a shopper's seckills (the
// Redis reservation keeps it in its script), checked alone before a
// request that must look the voucher up first: the limit then holds before
// any look-up. Allow answers Reserved (allowed) or RateLimited.
type ShopperLimit interface {
	Allow(ctx context.Context, userID, voucherID int64) (Reservation, error)
}

// StockBoard holds the sale state the reservation reads: stock and window.
type StockBoard interface {
	// LoadVoucher publishes a new voucher's stock and time window.
	LoadVoucher(ctx context.Context, v Voucher) error
	// RemainingStock is the stock left; ErrVoucherNotFound when not loaded.
	RemainingStock(ctx context.Context, voucherID int64) (int64, error)
}

// IDGenerator hands out unique, roughly time-ordered order ids.
type IDGenerator interface {
	NextID(ctx context.Context) (int64, error)
}
