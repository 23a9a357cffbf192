package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Repairing after a loss: orders read from the queue before the live
// store forgot the sale and persisted after, told to the live store.

// RepairAfter tells the live store of orders just persisted that were read
// from the queue in incarnation `readIn`, if the live store has become
// another incarnation since: a rebuild in between could not see them (they
// were neither in the new queue nor yet in the database), so without this
// their stock would be sold again. A repair is idempotent; it waits for a
// rebuild under way, and gives up after repairTimeout with an error.
//
// While the incarnation cannot be read whole (a cluster master out of
// reach), orders whose own masters can vouch that nothing changed since
// readIn need no repair (ScopedIncarnation): the consumers of the masters
// that answer go on acking, rather than wait for the one that does not.
func (r *Guard) RepairAfter(ctx context.Context, readIn string, orders []core.Order) error {
	if len(orders) == 0 {
		return nil
	}
	now, err := r.live.RefreshIncarnation(ctx)
	if err != nil {
		if scoped := r.features.Scoped; scoped != nil {
			if unaffected, serr := scoped.Unaffected(ctx, readIn, orders); serr == nil && unaffected {
				return nil
			}
		}
		return core.Wrap("repair: incarnation", core.CodeUnavailable, err)
	}
	if now == readIn {
		return nil
	}
	// An order cancelled since (expired while its message waited for the
	// ack, say) gave its unit back already: repairing it would take the
	// unit again.
	ids := make([]int64, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
	}
	statuses, err := r.ledger.OrderStatuses(ctx, ids)
	if err != nil {
		return core.Wrap("repair: order statuses", core.CodeUnavailable, err)
	}
	var todo []core.Order
	for _, o := range orders {
		if st, ok := statuses[o.ID]; !ok || (core.Order{Status: st}).Live() {
			todo = append(todo, o)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if r.queue.Holding != nil {
		// A queue that cannot list its orders (see awaitDrained): no
		// rebuild of the new incarnation runs until the queue holds none,
		// and these are held until this returns, so a voucher without live
		// state is rebuilt after they were persisted, from the database.
		// Waiting for that rebuild here would wait for this very ack.
		if _, err := r.live.Repair(ctx, todo); err != nil {
			return core.Wrap("repair", core.CodeUnavailable, err)
		}
		return nil
	}
	deadline := time.Now().Add(repairTimeout)
	for {
		vouchers := map[int64]bool{}
		for _, o := range todo {
			vouchers[o.VoucherID] = true
		}
		for v := range vouchers {
			if err := r.Ensure(ctx, v, core.Wait); err != nil && !errors.Is(err, core.ErrBusy) {
				return fmt.Errorf("repair: ensure voucher %d: %w", v, err)
			}
		}
		again, err := r.live.Repair(ctx, todo)
		if err != nil {
			return core.Wrap("repair", core.CodeUnavailable, err)
		}
		if len(again) == 0 {
			r.log.Warn("told Redis of orders read before it forgot the sale and persisted after",
				"orders", len(orders), "read_in", readIn, "now", now)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("repair: %d orders' vouchers still have no live state after %v", len(again), repairTimeout)
		}
		todo = again
		select {
		case <-ctx.Done():
			return fmt.Errorf("repair: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// repairTimeout bounds a repair's wait for rebuilds.
const repairTimeout = 15 * time.Second
