package core

import (
	"context"
)

// LiveGuard is what the request path and the consumers ask of recovery:
// whether a voucher's live state can be trusted, to rebuild it when it
// cannot, and to repair what was persisted across a loss of the live
// store. *recovery.Guard is the guard of a live store that can forget (Redis);
// NoRecovery stands in where the database is the live state (the sync
// baseline), so no caller checks for a missing one.
type LiveGuard interface {
	// Incarnation is the live store's incarnation as this process last
	// saw it ("" where there is none).
	Incarnation(ctx context.Context) (string, error)
	// Trusted reports from memory whether Ensure would cost nothing.
	Trusted(ctx context.Context, voucherID int64) bool
	// Verified records a voucher just loaded into the live store.
	Verified(ctx context.Context, voucherID int64)
	// Ensure makes the voucher's live state trustworthy before it is used.
	Ensure(ctx context.Context, voucherID int64, p Patience) error
	// EnsureShopper is Ensure for a shopper about to buy, who goes on at
	// once where the part of the voucher the shopper buys from is intact
	// while the rest is rebuilt (a guard that cannot tell is Ensure).
	EnsureShopper(ctx context.Context, voucherID, userID int64) error
	// Recheck is Ensure after a read found no state: whether a rebuild
	// was needed (and done) since.
	Recheck(ctx context.Context, voucherID int64, p Patience) (rebuilt bool, err error)
	// Lost handles a verified voucher whose live state is gone.
	Lost(ctx context.Context, voucherID int64, p Patience) error
	// RepairAfter tells the live store of orders persisted after it
	// forgot the sale they were read in.
	RepairAfter(ctx context.Context, readIn string, orders []Order) error
}

// NoRecovery is the guard of a sale whose live state is its database:
// every voucher is trusted, there is nothing to rebuild or repair, and a
// voucher without live state is simply not found.
var NoRecovery LiveGuard = noRecovery{}

type noRecovery struct{}

func (noRecovery) Incarnation(context.Context) (string, error)            { return "", nil }
func (noRecovery) Trusted(context.Context, int64) bool                    { return true }
func (noRecovery) Verified(context.Context, int64)                        {}
func (noRecovery) Ensure(context.Context, int64, Patience) error          { return nil }
func (noRecovery) EnsureShopper(context.Context, int64, int64) error      { return nil }
func (noRecovery) Recheck(context.Context, int64, Patience) (bool, error) { return false, nil }
func (noRecovery) Lost(context.Context, int64, Patience) error            { return ErrVoucherNotFound }
func (noRecovery) RepairAfter(context.Context, string, []Order) error     { return nil }

// GuardOr is g, or NoRecovery when none was given (a configuration's zero
// value).
func GuardOr(g LiveGuard) LiveGuard {
	if g == nil {
		return NoRecovery
	}
	return g
}

// Patience says whether a request waits for a rebuild of its voucher.
type Patience uint8

const (
	// Wait: as long as the request's context allows (a purchase, a stock
	// read: neither can be answered without the live state).
	Wait Patience = iota
	// DontWait: the guard starts the rebuild the voucher needs and answers
	// ErrBusy at once while one runs, here or on another instance (an
	// order read, which the database can answer meanwhile; a unit given
	// back, which the rebuild reads from the database).
	DontWait
)
