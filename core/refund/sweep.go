package refund

import (
	"context"
	"sync"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Sweep names many orders to refund: the paid orders of a voucher, of
// some of its shoppers, or by id (at least one of the three).
type Sweep struct {
	VoucherID int64
	Users     []int64
	OrderIDs  []int64
	// DryRun counts what would be refunded and refunds nothing.
	DryRun bool
	// Until: no refund is begun past it (zero: none left out); the
	// result says how many matched were left for another call.
	Until time.Time
	// Request is each refund's (its OrderID aside).
	Request Request
}

// MaxSweep bounds the orders one sweep refunds.
const MaxSweep = 100_000

// sweepBatch is how many orders one transaction begins: big enough that
// the voucher's stock row is locked a few dozen times for ten thousand
// refunds, not ten thousand times; small enough that a transaction holds
// its locks for milliseconds.
const sweepBatch = 200

// sweepWorkers carry batches at once, each with its providerCalls: the
// provider's calls wait on the network more than on a core.
const sweepWorkers = 4

// SweepResult is what a sweep did: Matched paid orders, of which Refunded
// were begun by it; Skipped were refunded (or changed) by another
// meanwhile; Failed could not be begun (the database failed: not
// refunded), or were begun and left to the duty (the provider did not
// answer: refunded within seconds).
type SweepResult struct {
	Matched, Refunded, Skipped, Failed int
	// More were matched and not begun: Until passed.
	More int
}

// Sweep refunds the paid orders s names (with DryRun, only counts them).
func (r *Refunds) Sweep(ctx context.Context, s Sweep) (SweepResult, error) {
	if s.VoucherID == 0 && len(s.Users) == 0 && len(s.OrderIDs) == 0 {
		return SweepResult{}, core.E(core.CodeBadRequest, "name the orders: a voucher, users or order ids")
	}
	ids, err := r.cfg.Store.Match(ctx, s, MaxSweep)
	if err != nil {
		return SweepResult{}, core.Wrap("refund sweep: match", core.CodeUnavailable, err)
	}
	res := SweepResult{Matched: len(ids)}
	if s.DryRun {
		return res, nil
	}
	var mu sync.Mutex
	work := make(chan []int64)
	var wg sync.WaitGroup
	for range min(sweepWorkers, (len(ids)+sweepBatch-1)/sweepBatch) {
		wg.Go(func() {
			for batch := range work {
				done := r.refundBatch(ctx, s.Request, batch)
				mu.Lock()
				res.Refunded += done.Refunded
				res.Skipped += done.Skipped
				res.Failed += done.Failed
				mu.Unlock()
			}
		})
	}
	sent := 0
	for sent < len(ids) {
		if ctx.Err() != nil || (!s.Until.IsZero() && time.Now().After(s.Until)) {
			break
		}
		batch := ids[sent:min(sent+sweepBatch, len(ids))]
		work <- batch
		sent += len(batch)
	}
	close(work)
	wg.Wait()
	res.More = len(ids) - sent
	return res, nil
}

// refundBatch refunds the paid ones of ids: begun in one transaction, the
// units given to the live store, the provider's refunds made a few at a
// time, and those made finished in one transaction. Orders no longer paid
// are skipped; a batch the database could not begin, or a refund the
// provider did not make, fails (begun ones are the duty's to finish).
func (r *Refunds) refundBatch(ctx context.Context, req Request, ids []int64) SweepResult {
	batch, err := r.cfg.Store.Begin(ctx, req, ids, r.now())
	if err != nil {
		r.cfg.Log.Warn("refund sweep: a batch not begun", "orders", len(ids), "err", err)
		return SweepResult{Failed: len(ids)}
	}
	res := SweepResult{Skipped: len(batch.Left)}
	if req.ReturnUnit {
		orders := make([]core.Order, len(batch.Begun))
		for i, b := range batch.Begun {
			orders[i] = b.Order
		}
		r.cfg.Releaser.Release(context.WithoutCancel(ctx), orders...)
	}
	given, failed := r.giveBackAll(ctx, batch.Begun)
	res.Failed = failed
	if len(given) == 0 {
		return res
	}
	if err := r.cfg.Store.Finish(ctx, given, r.now()); err != nil {
		r.cfg.Log.Warn("refund sweep: refunds made and not recorded; the duty records them", "orders", len(given), "err", err)
		res.Failed += len(given)
		return res
	}
	res.Refunded = len(given)
	return res
}
