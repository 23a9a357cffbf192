package recovery

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// DriftWatch audits a few vouchers on sale each run and tells how many
// units nobody holds: the live stock below what the database and the
// queue account for (a unit reserved for an order that is in neither, say
// a dead letter, and so never sold again). A run audits Sample vouchers,
// the next ones of the list each time, so every voucher on sale comes
// round; a voucher counts only when two audits running found the same
// shortfall or more, since a sale in flight shows differences that the
// next audit no longer shows. A queue that cannot list what it holds
// (memory, pubsub, the plain list, RabbitMQ) gives nothing to count
// against. It changes nothing.
type DriftWatch struct {
	Guard *Guard
	// Vouchers lists the vouchers on sale now.
	Vouchers func(ctx context.Context) ([]int64, error)
	// Sample is how many a run audits (default 5).
	Sample int
	// Report is told, after each run, the units nobody holds over the
	// vouchers audited so far and how many vouchers those are.
	Report func(units int64, vouchers int)

	mu       sync.Mutex // one run at a time
	next     int
	seen     map[int64]int64 // each voucher's shortfall at its last audit
	standing map[int64]int64 // the shortfalls seen twice running
}

// Duty is the watch as a duty, every 30 s.
func (w *DriftWatch) Duty() core.Duty {
	return core.Duty{Name: "drift audit", Every: 30 * time.Second, Do: w.Check}
}

// Check audits the next sample of vouchers and reports.
func (w *DriftWatch) Check(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen, w.standing = map[int64]int64{}, map[int64]int64{}
	}
	ids, err := w.Vouchers(ctx)
	if err != nil {
		return err
	}
	on := make(map[int64]bool, len(ids))
	for _, id := range ids {
		on[id] = true
	}
	for id := range w.standing {
		if !on[id] { // off sale: its units are no longer anyone's to sell
			delete(w.standing, id)
			delete(w.seen, id)
		}
	}
	sample := w.Sample
	if sample <= 0 {
		sample = 5
	}
	var errs []error
	for i := 0; i < min(sample, len(ids)); i++ {
		id := ids[(w.next+i)%len(ids)]
		errs = append(errs, w.audit(ctx, id))
	}
	if len(ids) > 0 {
		w.next = (w.next + sample) % len(ids)
	}
	var units int64
	for _, n := range w.standing {
		units += n
	}
	w.Report(units, len(w.standing))
	return errors.Join(errs...)
}

// audit finds one voucher's shortfall, standing once seen twice running.
func (w *DriftWatch) audit(ctx context.Context, id int64) error {
	a, err := w.Guard.Audit(ctx, id)
	if err != nil {
		return err
	}
	short := int64(0)
	// A queue that cannot tell what it holds leaves an order in flight
	// indistinguishable from one nobody holds: not counted there.
	if a.QueueHolds && a.Live.Present && !a.Live.Fenced && a.Live.VerifiedIn == a.Incarnation {
		short = max(a.ExpectedStock-a.Live.Stock, 0)
	}
	prev, audited := w.seen[id]
	w.seen[id] = short
	if audited && short > 0 && prev > 0 {
		w.standing[id] = min(short, prev)
	} else {
		delete(w.standing, id)
	}
	return nil
}
