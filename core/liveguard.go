package core

import "context"

// LiveGuard is what the request path and the consumers ask of recovery:
// whether a voucher's live state can be trusted, to rebuild it when it
// cannot, and to repair what was persisted across a loss of the live
// store. *Recovery is the guard of a live store that can forget (Redis);
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
	Ensure(ctx context.Context, voucherID int64) error
	// Recheck is Ensure after a read found no state: whether a rebuild
	// was needed (and done) since.
	Recheck(ctx context.Context, voucherID int64) (rebuilt bool, err error)
	// Lost handles a verified voucher whose live state is gone.
	Lost(ctx context.Context, voucherID int64) error
	// RepairAfter tells the live store of orders persisted after it
	// forgot the sale they were read in.
	RepairAfter(ctx context.Context, readIn string, orders []Order) error
}

// NoRecovery is the guard of a sale whose live state is its database:
// every voucher is trusted, there is nothing to rebuild or repair, and a
// voucher without live state is simply not found.
var NoRecovery LiveGuard = noRecovery{}

type noRecovery struct{}

func (noRecovery) Incarnation(context.Context) (string, error)        { return "", nil }
func (noRecovery) Trusted(context.Context, int64) bool                { return true }
func (noRecovery) Verified(context.Context, int64)                    {}
func (noRecovery) Ensure(context.Context, int64) error                { return nil }
func (noRecovery) Recheck(context.Context, int64) (bool, error)       { return false, nil }
func (noRecovery) Lost(context.Context, int64) error                  { return ErrVoucherNotFound }
func (noRecovery) RepairAfter(context.Context, string, []Order) error { return nil }

var _ LiveGuard = (*Recovery)(nil)

// ShopperGuard is a LiveGuard that can let a shopper buy from the part of
// a voucher that is intact while the rest is rebuilt
// (Recovery.EnsureShopper).
type ShopperGuard interface {
	EnsureShopper(ctx context.Context, voucherID, userID int64) error
}

// guardOr is g, or NoRecovery when none was given: a nil interface or a
// nil *Recovery.
func guardOr(g LiveGuard) LiveGuard {
	if r, ok := g.(*Recovery); g == nil || (ok && r == nil) {
		return NoRecovery
	}
	return g
}

type withoutWaitingKey struct{}

// WithoutWaiting marks a request that must not wait for a rebuild of the
// voucher (an order read, which the database can answer meanwhile): a
// guard starts the rebuild it needs, and answers ErrBusy at once while one
// runs, here or on another instance.
func WithoutWaiting(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutWaitingKey{}, true)
}

// waits reports whether ctx may wait for a rebuild.
func waits(ctx context.Context) bool { return ctx.Value(withoutWaitingKey{}) == nil }
