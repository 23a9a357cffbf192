package recovery

import (
	"context"
	"fmt"

	"github.com/seckill-lab/seckill/core"
)

// Auditing a voucher: its live state set against the database and the
// queue, for an operator.

// Audit is a voucher's live state set against the database and the queue.
type Audit struct {
	VoucherID int64
	// Incarnation of the live store now.
	Incarnation string
	Live        LiveState
	// DatabaseStock is the stock column, DatabaseOrders the persisted
	// live orders (created or paid: a cancelled one holds no unit).
	DatabaseStock  int64
	DatabaseOrders int
	// QueueHolds: the queue can tell what it holds (OrderHolder); Held is
	// then the voucher's orders it holds, HeldUnpersisted those not yet in
	// the database.
	QueueHolds bool
	Held       int
	// Lettered are the open dead letters' orders holding a unit
	// (Ledger.LetteredOrders); HeldUnpersisted counts the queue's and
	// theirs the database lacks.
	Lettered, HeldUnpersisted int
	// ExpectedStock is what the live stock should be: the stock column
	// minus the held orders not yet persisted.
	ExpectedStock int64
	// Differences says, a line each, where the live state disagrees; empty
	// when it agrees.
	Differences []string
}

// Audit reads the voucher's live state, the database and the queue, and
// reports where they disagree. It changes nothing (Reconcile repairs).
// The reads are not one snapshot: a sale under way shows in-flight
// differences that a second audit no longer shows.
func (r *Guard) Audit(ctx context.Context, voucherID int64) (Audit, error) {
	a := Audit{VoucherID: voucherID}
	var err error
	if a.Incarnation, err = r.live.Incarnation(ctx); err != nil {
		return a, core.Wrap("audit: incarnation", core.CodeUnavailable, err)
	}
	var held []core.Order
	if r.queue.Holder != nil {
		a.QueueHolds = true
		// The voucher's buckets say which shards hold its orders.
		found, err := r.unknown.Find(ctx, voucherID, r.ledger.FindVoucher)
		if err != nil {
			return a, err
		}
		found.ID = voucherID
		if held, err = r.queue.HeldOrdersOf(ctx, found); err != nil {
			return a, core.Wrap("audit: held orders", core.CodeUnavailable, err)
		}
	}
	lettered, err := r.ledger.LetteredOrders(ctx, voucherID)
	if err != nil {
		return a, core.Wrap("audit: dead-lettered orders", core.CodeUnavailable, err)
	}
	a.Held, a.Lettered = len(held), len(lettered)
	held = withLettered(held, lettered)
	v, persisted, known, err := r.ledger.SaleSnapshot(ctx, voucherID, orderIDs(held, nil))
	if err != nil {
		return a, err
	}
	if a.Live, err = r.live.LiveState(ctx, voucherID); err != nil {
		return a, core.Wrap("audit: live state", core.CodeUnavailable, err)
	}
	a.DatabaseStock = v.Stock
	want := make(map[int64]int64, len(persisted)+len(held))
	for _, o := range persisted {
		if o.Live() {
			want[o.UserID] = o.ID
			a.DatabaseOrders++
		}
	}
	for _, o := range held {
		if _, persistedAlready := known[o.ID]; !persistedAlready && want[o.UserID] == 0 {
			want[o.UserID] = o.ID
			a.HeldUnpersisted++
		}
	}
	a.ExpectedStock = max(v.Stock-int64(a.HeldUnpersisted), 0)
	switch {
	case a.Live.Fenced:
		a.Differences = append(a.Differences, "a rebuild is under way (fenced)")
	case !a.Live.Present:
		a.Differences = append(a.Differences, "the live store has no state for the voucher (it is rebuilt on its next use)")
	default:
		if a.Live.VerifiedIn != a.Incarnation {
			a.Differences = append(a.Differences, fmt.Sprintf("verified in incarnation %q, the live store is now %q (it is rebuilt on its next use)", a.Live.VerifiedIn, a.Incarnation))
		}
		if a.Live.Stock != a.ExpectedStock {
			a.Differences = append(a.Differences, fmt.Sprintf("stock: live %d, expected %d (database %d minus %d held, unpersisted: queued or dead-lettered)", a.Live.Stock, a.ExpectedStock, v.Stock, a.HeldUnpersisted))
		}
		missing, unknown := 0, 0
		for u := range want {
			if _, ok := a.Live.Buyers[u]; !ok {
				missing++
			}
		}
		for u := range a.Live.Buyers {
			if _, ok := want[u]; !ok {
				unknown++
			}
		}
		if missing > 0 {
			a.Differences = append(a.Differences, fmt.Sprintf("buyers: %d in the database or the queue are unknown to the live store (they could buy again)", missing))
		}
		if unknown > 0 {
			a.Differences = append(a.Differences, fmt.Sprintf("buyers: %d known to the live store are in neither the database nor the queue (orders lost, or not yet enqueued)", unknown))
		}
	}
	return a, nil
}
