package refund

import (
	"context"
	"errors"
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

// sweepWorkers refund at once: each refund is two transactions and the
// provider's call, which wait on the network more than on a core.
const sweepWorkers = 16

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
	work := make(chan int64)
	var wg sync.WaitGroup
	for range min(sweepWorkers, len(ids)) {
		wg.Go(func() {
			for id := range work {
				req := s.Request
				req.OrderID = id
				began, err := r.Refund(ctx, req)
				// Paid when matched and not now: refunded (or cancelled)
				// by another meanwhile.
				gone := errors.Is(err, ErrNotPaid) || errors.Is(err, core.ErrOrderNotFound)
				mu.Lock()
				switch {
				case err != nil && !gone:
					res.Failed++
				case began:
					res.Refunded++
				default:
					res.Skipped++
				}
				mu.Unlock()
				if err != nil && !gone {
					r.cfg.Log.Warn("refund sweep: an order not refunded now", "order", id, "begun", began, "err", err)
				}
			}
		})
	}
	sent := 0
	for _, id := range ids {
		if ctx.Err() != nil || (!s.Until.IsZero() && time.Now().After(s.Until)) {
			break
		}
		work <- id
		sent++
	}
	close(work)
	wg.Wait()
	res.More = len(ids) - sent
	return res, nil
}
