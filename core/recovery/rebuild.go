package recovery

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Rebuilding a voucher's live state: fenced, one at a time per voucher in
// this process, from the queue's held orders and the database's snapshot.

// Report says what one rebuild found and changed.
type Report struct {
	VoucherID int64
	// Incarnation the state was rebuilt for; Previous the one it had
	// been verified in ("" when the live store had forgotten it).
	Incarnation, Previous string
	// Persisted orders in the database, Held the queue still holds (queued
	// or delivered and unacknowledged), HeldOnly those of them not yet
	// persisted. Requeued are the buyers' orders the live store named and
	// neither the queue nor the database had, handed to the queue again
	// (counted in Held and HeldOnly too).
	Persisted, Held, HeldOnly, Requeued int
	// StockBefore is the live stock before (-1: none), StockAfter after;
	// BuyersBefore and BuyersAfter count the buyers.
	StockBefore, StockAfter   int64
	BuyersBefore, BuyersAfter int
	Took                      time.Duration
}

// Rebuild rebuilds the voucher's live state, one rebuild at a time per
// voucher in this process; callers that arrive during one wait for it.
func (r *Guard) Rebuild(ctx context.Context, voucherID int64) error {
	_, err := r.run(ctx, voucherID, core.Wait, asRebuild)
	return err
}

// Reconcile rebuilds the voucher's live state now, whatever its
// incarnation, and reports what changed (an operator's repair). A caller
// arriving during another rebuild of the voucher in this process waits for
// that one, and gets an empty report.
//
// On a queue that cannot list the orders it holds (no OrderHolder: the
// in-process queue, Pub/Sub), a buyer the live store knows and the
// database does not is an order in some consumer's hands — or one lost.
// No rebuild can tell which, so while there are any, Reconcile refuses
// with CodeNotReconcilable rather than sell their units again.
func (r *Guard) Reconcile(ctx context.Context, voucherID int64) (Report, error) {
	return r.run(ctx, voucherID, core.Wait, asReconcile)
}

// StockChange is an operator's stock change made inside a reconcile's
// fence: given the units the voucher has left (the database's column less
// the orders the queue holds unpersisted), it records the change in the
// database and answers the units to add to what is restored (0: refused,
// or recorded by an earlier attempt, whose column the snapshot has).
type StockChange func(ctx context.Context, remaining int64) (add int64, err error)

// rebuildAs is how a rebuild runs: an operator's reconcile (the live
// store made the database's and the queue's, as asked) or a rebuild after
// a loss, and the stock change made within its fence.
type rebuildAs struct {
	operator bool
	change   StockChange
}

func noChange(context.Context, int64) (int64, error) { return 0, nil }

var (
	asRebuild   = rebuildAs{change: noChange}
	asReconcile = rebuildAs{operator: true, change: noChange}
)

// ReconcileChanging is a reconcile with a stock change made within its
// fence, for a voucher in buckets (whose stock no one script can move):
// the sale of the voucher waits for the rebuild, a few milliseconds, and
// the change lands in the database and the live store together, or in
// neither. A reconcile already under way (here or on another instance)
// is waited out, and this one runs after it.
func (r *Guard) ReconcileChanging(ctx context.Context, voucherID int64, change StockChange) (Report, error) {
	var ran atomic.Bool // set on the rebuild's goroutine, which may outlive ctx
	as := rebuildAs{operator: true, change: func(ctx context.Context, remaining int64) (int64, error) {
		ran.Store(true)
		return change(ctx, remaining)
	}}
	for attempt := 0; ; attempt++ {
		report, err := r.run(ctx, voucherID, core.Wait, as)
		if err != nil || ran.Load() {
			return report, err
		}
		if attempt == 10 {
			return report, core.Wrap("recovery: reconcile with a stock change", core.CodeBusy, core.ErrBusy)
		}
	}
}

// ErrNotReconcilable: see Reconcile.
var ErrNotReconcilable = core.E(core.CodeNotReconcilable,
	"this backend cannot list the orders it holds, and some of this voucher's are reserved and not yet persisted: retry once they are")

func (r *Guard) run(ctx context.Context, voucherID int64, p core.Patience, as rebuildAs) (Report, error) {
	operator := as.operator
	// Cached by the live store's adapter: no round trip. An error leaves
	// it "", which no failure was recorded in.
	inc, _ := r.live.Incarnation(ctx)
	r.mu.Lock()
	b, ok := r.running[voucherID]
	if f, failing := r.failing[voucherID]; !ok && !operator && failing && f.incarnation == inc && time.Now().Before(f.until) {
		// The last rebuild failed moments ago (a Redis out of memory, say):
		// this voucher's shoppers are told to retry, without a rebuild
		// each that would fail the same way; the rest of the sale goes on.
		r.mu.Unlock()
		return Report{VoucherID: voucherID}, core.ErrBusy
	}
	if !ok {
		// The rebuild is no caller's: it runs to its own deadline, shorter
		// than the fence, whoever gives up waiting for it. A request that
		// started it waits no longer than its own deadline.
		b = &rebuild{done: make(chan struct{})}
		r.running[voucherID] = b
		go func() {
			// Not the caller's values either: a rebuild waits for another
			// instance's as long as the fence allows, whoever started it.
			rctx, cancel := context.WithTimeout(context.Background(), r.fenceTTL/2)
			defer cancel()
			b.report, b.err = r.rebuild(rctx, voucherID, as)
			r.mu.Lock()
			delete(r.running, voucherID)
			r.backOff(voucherID, inc, b.err)
			r.mu.Unlock()
			close(b.done)
		}()
	}
	r.mu.Unlock()
	var gaveUp <-chan struct{} = ctx.Done()
	if p == core.DontWait {
		// A rebuild already done still answers (a select picks at random
		// among ready cases).
		select {
		case <-b.done:
		default:
			gaveUp = closed
		}
	}
	select {
	case <-b.done:
		err := b.err
		if !operator && errors.Is(err, ErrNotReconcilable) {
			// An operator's reconcile refused, and restored the voucher as
			// a rebuild of the request path would have.
			err = nil
		}
		var nd notDrained
		if errors.As(err, &nd) {
			code := core.CodeBusy // a shopper retries in a moment
			if operator {
				code = core.CodeNotReconcilable
			}
			err = &core.Error{Code: code, Op: "recovery", Message: nd.message(), Err: err}
		}
		if ok {
			// Another caller's rebuild: its report is that caller's.
			return Report{VoucherID: voucherID}, err
		}
		return b.report, err
	case <-gaveUp:
		if ctx.Err() == nil {
			return Report{VoucherID: voucherID}, core.ErrBusy // not waiting (DontWait)
		}
		return Report{VoucherID: voucherID}, core.Wrap("recovery: waiting for the rebuild", core.CodeUnavailable, ctx.Err())
	}
}

// A rebuild that failed holds off the next one of its voucher for
// rebuildBackoffFirst, doubling with each failure in a row up to
// rebuildBackoffMax, while the live store is the incarnation it failed in.
// An LRU squeeze made every request of a voucher start a rebuild that
// failed ("rebuild failed" 2,134 times in the outside review's run, 681
// shoppers gave up): each now costs Redis one attempt per backoff, not one
// per shopper. The cap is what a squeeze's end can wait for the first
// rebuild after it: at 5 s the sale stayed stopped up to 3.2 s after
// Redis had memory again (the outside review's second run: 11.5 s
// stopped, 1,218 gave up); a squeeze that ends with Redis forgetting part
// of the sale (an evicted stream: another incarnation) rebuilds at once.
const (
	rebuildBackoffFirst = 100 * time.Millisecond
	rebuildBackoffMax   = time.Second
)

// failure is a voucher's failed rebuilds in a row, in incarnation: the
// next waits until.
type failure struct {
	wait        time.Duration
	until       time.Time
	incarnation string
}

// backOff records how a rebuild of the voucher ended; r.mu is held. Only
// a failure of the live store or the database counts: not a voucher that
// does not exist, another's rebuild under way, or a queue not drained.
func (r *Guard) backOff(voucherID int64, inc string, err error) {
	if err == nil || core.CodeOf(err) != core.CodeUnavailable {
		delete(r.failing, voucherID)
		return
	}
	f := r.failing[voucherID]
	if f.incarnation != inc {
		f = failure{incarnation: inc}
	}
	f.wait = min(max(2*f.wait, rebuildBackoffFirst), rebuildBackoffMax)
	f.until = time.Now().Add(f.wait)
	r.failing[voucherID] = f
}

// closed is a channel that is always ready.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (r *Guard) rebuild(ctx context.Context, voucherID int64, as rebuildAs) (Report, error) {
	operator := as.operator
	start := time.Now()
	// A voucher the database does not have is not fenced: requests for
	// made-up ids leave nothing behind in Redis.
	found, err := r.unknown.Find(ctx, voucherID, r.ledger.FindVoucher)
	found.ID = voucherID
	if err != nil {
		if errors.Is(err, core.ErrVoucherNotFound) {
			return Report{}, err
		}
		return Report{}, r.failed(voucherID, core.Wrap("recovery: find voucher", core.CodeUnavailable, err))
	}
	if r.buckets != nil {
		r.buckets.KnowBuckets(voucherID, found.BucketCount())
	}
	before, err := r.live.LiveState(ctx, voucherID)
	if err != nil {
		return Report{}, r.failed(voucherID, core.Wrap("recovery: live state", core.CodeUnavailable, err))
	}
	fence := r.live.Fence
	if pf := r.features.PartialFencer; pf != nil && !operator {
		fence = pf.FenceLost
	}
	token, ok, err := fence(ctx, voucherID, r.fenceTTL)
	if err != nil {
		return Report{}, r.failed(voucherID, core.Wrap("recovery: fence", core.CodeUnavailable, err))
	}
	if !ok {
		return Report{VoucherID: voucherID}, r.waitForOther(ctx, voucherID)
	}
	report, err := r.rebuildFenced(ctx, found, token, start, before, as)
	if err != nil && !errors.Is(err, core.ErrVoucherNotFound) && !errors.Is(err, ErrNotReconcilable) {
		if uerr := r.live.Unfence(ctx, voucherID, token); uerr != nil {
			r.log.Warn("rebuild: could not lift the fence; it expires on its own", "voucher", voucherID, "err", uerr)
		}
	}
	return report, err
}

func (r *Guard) rebuildFenced(ctx context.Context, found core.Voucher, token string, start time.Time, before LiveState, as rebuildAs) (Report, error) {
	voucherID, operator := found.ID, as.operator
	inc, err := r.live.Incarnation(ctx)
	if err != nil {
		return Report{}, r.failed(voucherID, core.Wrap("recovery: incarnation", core.CodeUnavailable, err))
	}
	held, err := r.heldOrders(ctx, found, inc)
	if err != nil {
		return Report{}, err
	}
	v, persisted, known, err := r.ledger.SaleSnapshot(ctx, voucherID, orderIDs(held, buyerOrders(before)))
	if errors.Is(err, core.ErrVoucherNotFound) {
		return Report{}, core.ErrVoucherNotFound // the fence expires on its own: nothing to restore
	}
	if err != nil {
		return Report{}, r.failed(voucherID, core.Wrap("recovery: sale snapshot", core.CodeUnavailable, err))
	}
	sale := newBuyers(persisted, known)
	var requeued []core.Order
	if !operator {
		// An operator's reconcile makes the live store the database's and
		// the queue's, as asked (an order deleted from the database by
		// hand gives its unit back); a rebuild after a loss keeps what the
		// shoppers were answered.
		if requeued, err = r.requeueStranded(ctx, voucherID, before, sale.ids, held); err != nil {
			return Report{}, r.failed(voucherID, core.Wrap("recovery: requeue", core.CodeUnavailable, err))
		}
		held = append(held, requeued...)
	}
	heldOnly := sale.addHeld(held, func(o core.Order, other int64) {
		// The store will refuse it (buyer_holds_another); it takes no stock.
		r.log.Error("rebuild: a held order's buyer already has another order of the voucher",
			"voucher", voucherID, "user", o.UserID, "order", o.ID, "other", other)
	})
	report := Report{VoucherID: voucherID, Incarnation: inc, Previous: before.VerifiedIn, Persisted: sale.live,
		Held: len(held), HeldOnly: heldOnly, Requeued: len(requeued), StockBefore: -1, BuyersBefore: len(before.Buyers), BuyersAfter: len(sale.buyers)}
	if before.Present {
		report.StockBefore = before.Stock
	}
	v.Stock -= int64(heldOnly)
	if v.Stock < 0 {
		r.log.Error("rebuild: the queue holds more unpersisted orders than the database has stock",
			"voucher", voucherID, "stock_column", v.Stock+int64(heldOnly), "held_unpersisted", heldOnly)
		v.Stock = 0
	}
	add, err := as.change(ctx, v.Stock)
	if err != nil {
		return Report{}, r.failed(voucherID, core.Wrap("recovery: stock change", core.CodeUnavailable, err))
	}
	v.Stock += add
	if err := r.live.Restore(ctx, RestoredSale{Voucher: v, Buyers: sale.buyers, Incarnation: inc}, token); err != nil {
		return Report{}, r.failed(voucherID, core.Wrap("recovery: restore", core.CodeUnavailable, err))
	}
	report.StockAfter, report.Took = v.Stock, time.Since(start)
	return report, r.restored(ctx, report, operator)
}

// heldOrders are the voucher's orders the queue holds. The queue is read
// before the database: an order acknowledged in between was committed
// before the database is read, so every order is seen at least once, and
// the union by id counts it once.
func (r *Guard) heldOrders(ctx context.Context, found core.Voucher, inc string) ([]core.Order, error) {
	held, err := r.queueHeld(ctx, found, inc)
	if err != nil {
		return nil, err
	}
	// And the open dead letters' orders: a rebuild keeps their units and
	// their buyers' marks the letters' (the fault run's rebuild dealt them
	// back on sale, and a re-drive then sold them twice).
	lettered, err := r.ledger.LetteredOrders(ctx, found.ID)
	if err != nil {
		return nil, r.failed(found.ID, core.Wrap("recovery: dead-lettered orders", core.CodeUnavailable, err))
	}
	return withLettered(held, lettered), nil
}

// withLettered is held and the lettered orders it does not hold already.
func withLettered(held, lettered []core.Order) []core.Order {
	seen := make(map[int64]bool, len(held))
	for _, o := range held {
		seen[o.ID] = true
	}
	for _, o := range lettered {
		if !seen[o.ID] {
			held = append(held, o)
			seen[o.ID] = true
		}
	}
	return held
}

// queueHeld is what the queue holds of the voucher.
func (r *Guard) queueHeld(ctx context.Context, found core.Voucher, inc string) ([]core.Order, error) {
	if r.queue.Holder != nil {
		held, err := r.queue.HeldOrdersOf(ctx, found)
		if err != nil {
			return nil, r.failed(found.ID, core.Wrap("recovery: held orders", core.CodeUnavailable, err))
		}
		return held, nil
	}
	// A queue that cannot list what it holds: the live store's buyers,
	// read under the fence (no reservation can add one now), stand for
	// it. Those the database lacks are in a consumer's hands (or lost).
	if r.queue.Holding != nil {
		// The queue outlives the live store: its orders reserved before
		// a loss are in neither the live store nor (yet) the database.
		if err := r.awaitDrained(ctx, found.ID, inc); err != nil {
			return nil, err
		}
	}
	fenced, err := r.live.LiveState(ctx, found.ID)
	if err != nil {
		return nil, r.failed(found.ID, core.Wrap("recovery: live state", core.CodeUnavailable, err))
	}
	var held []core.Order
	for user, order := range fenced.Buyers {
		held = append(held, core.Order{ID: order, UserID: user, VoucherID: found.ID})
	}
	return held, nil
}

// buyers is a rebuilt voucher's buyers: each persisted live order's, then
// each held order's the database lacks.
type buyers struct {
	buyers map[int64]int64 // user -> order
	// ids are the orders the database has among those the rebuild looks
	// at, live or not: a held order the database holds as cancelled is no
	// buyer, whatever the queue says.
	ids  map[int64]bool
	live int // persisted live orders
}

// newBuyers is the live orders' buyers, with known the statuses the
// database has of the other orders the rebuild looks at.
func newBuyers(live []core.Order, known map[int64]core.OrderStatus) *buyers {
	b := &buyers{buyers: make(map[int64]int64, len(live)), ids: make(map[int64]bool, len(live)+len(known))}
	for id := range known {
		b.ids[id] = true
	}
	for _, o := range live {
		b.ids[o.ID] = true
		if o.Live() {
			b.buyers[o.UserID] = o.ID
			b.live++
		}
	}
	return b
}

// orderIDs are the ids of orders, then extra.
func orderIDs(orders []core.Order, extra []int64) []int64 {
	ids := make([]int64, 0, len(orders)+len(extra))
	for _, o := range orders {
		ids = append(ids, o.ID)
	}
	return append(ids, extra...)
}

// buyerOrders are the orders the live store named before the rebuild (its
// buyers' marks): the requeue asks whether the database has them.
func buyerOrders(before LiveState) []int64 {
	ids := make([]int64, 0, len(before.Buyers))
	for _, id := range before.Buyers {
		ids = append(ids, id)
	}
	return ids
}

// addHeld adds the held orders the database lacks and returns how many
// it added; refused is told of one whose buyer holds another order.
func (b *buyers) addHeld(held []core.Order, refused func(o core.Order, other int64)) int {
	added := 0
	for _, o := range held {
		if b.ids[o.ID] {
			continue
		}
		if other, ok := b.buyers[o.UserID]; ok && other != o.ID {
			refused(o, other)
			continue
		}
		b.buyers[o.UserID] = o.ID
		b.ids[o.ID] = true
		added++
	}
	return added
}

// restored finishes a rebuild whose state is restored: the voucher is
// verified, the instances nudged, the rebuild logged and observed. An
// operator's reconcile that cannot tell the orders in consumers' hands
// from lost ones is refused, after restoring what it read under the fence
// — those orders' buyers kept — so the sale goes on as if the request
// path had rebuilt it.
func (r *Guard) restored(ctx context.Context, report Report, operator bool) error {
	r.verified.Store(report.VoucherID, report.Incarnation)
	// The rebuilt stock may be more than was remembered, here and on every
	// other instance.
	if err := r.memo.StockBack(ctx, report.VoucherID); err != nil {
		r.log.Warn("rebuild: could not nudge the other instances; their memo of the voucher lapses on its own", "voucher", report.VoucherID, "err", err)
	}
	if operator && r.queue.Holder == nil && report.HeldOnly > 0 {
		r.log.Warn("reconcile refused: orders of the voucher are reserved and not yet persisted, and the queue cannot list them",
			"voucher", report.VoucherID, "unpersisted", report.HeldOnly)
		return ErrNotReconcilable
	}
	r.log.Warn("rebuilt a voucher's live state from the database and the queue",
		"voucher", report.VoucherID, "incarnation", report.Incarnation, "previous", report.Previous, "persisted", report.Persisted,
		"held", report.Held, "held_unpersisted", report.HeldOnly, "stock_before", report.StockBefore, "stock", report.StockAfter,
		"buyers_before", report.BuyersBefore, "buyers", report.BuyersAfter, "took", report.Took)
	if r.obs != nil {
		r.obs.Rebuilt(report)
	}
	return nil
}

// drainPoll is how often a rebuild asks again whether the queue still
// holds orders; drainReserve is the part of the rebuild's deadline left for
// the rebuild itself once the queue drained.
const (
	drainPoll    = 250 * time.Millisecond
	drainReserve = 2 * time.Second
)

// awaitDrained returns once the queue was found holding no order in this
// incarnation of the live store — then every order reserved before the
// live store's loss is in the database, and every one after is among the
// live store's buyers — or notDrained when it still holds some by the
// rebuild's deadline: the fence is lifted, and the next request tries
// again. The answer is kept in the live store (MarkDrained), so only the
// first rebuild of an incarnation, in any instance, waits.
func (r *Guard) awaitDrained(ctx context.Context, voucherID int64, inc string) error {
	// Without an incarnation a loss cannot be told from the process's
	// memory: only the live store's own record counts.
	if p := r.drainedIn.Load(); p != nil && *p == inc && inc != "" {
		return nil
	}
	was, ok, err := r.live.DrainedIn(ctx)
	if err != nil {
		return r.failed(voucherID, core.Wrap("recovery: drained in", core.CodeUnavailable, err))
	}
	if ok && was == inc {
		r.drainedIn.Store(&inc)
		return nil
	}
	giveUp := time.Now().Add(3 * time.Second)
	if d, ok := ctx.Deadline(); ok {
		giveUp = d.Add(-drainReserve)
	}
	start := time.Now()
	for {
		what, err := r.queue.Holding.Holding(ctx)
		if err != nil {
			return r.failed(voucherID, core.Wrap("recovery: is the queue drained", core.CodeUnavailable, err))
		}
		if what == "" {
			if err := r.live.MarkDrained(ctx, inc); err != nil {
				return r.failed(voucherID, core.Wrap("recovery: mark drained", core.CodeUnavailable, err))
			}
			r.drainedIn.Store(&inc)
			r.log.Warn("rebuild: the queue holds no order reserved before this incarnation; vouchers are rebuilt from the database",
				"voucher", voucherID, "incarnation", inc, "waited", time.Since(start))
			return nil
		}
		if time.Now().Add(drainPoll).After(giveUp) {
			r.log.Warn("rebuild: the queue still holds orders reserved before this incarnation; the voucher stays closed until it holds none",
				"voucher", voucherID, "incarnation", inc, "holding", what, "waited", time.Since(start))
			return notDrained{what}
		}
		select {
		case <-ctx.Done():
			return notDrained{what}
		case <-time.After(drainPoll):
		}
	}
}

// notDrained: a rebuild found the queue still holding orders it cannot
// list (see awaitDrained). run answers it busy to a shopper and
// not_reconcilable to an operator.
type notDrained struct{ holding string }

func (e notDrained) Error() string { return "the queue still holds " + e.holding }

func (e notDrained) message() string {
	return "the queue still holds orders reserved before the live store lost its state, and cannot list them: retry once they are persisted"
}

// waitForOther waits for another instance's rebuild of the voucher.
func (r *Guard) waitForOther(ctx context.Context, voucherID int64) error {
	deadline := time.Now().Add(r.wait)
	for time.Now().Before(deadline) {
		fenced, err := r.live.Fenced(ctx, voucherID)
		if err != nil {
			return core.Wrap("recovery: fence", core.CodeUnavailable, err)
		}
		if !fenced {
			inc, err := r.live.Incarnation(ctx)
			if err != nil {
				return core.Wrap("recovery: incarnation", core.CodeUnavailable, err)
			}
			if was, ok, err := r.live.VerifiedIn(ctx, voucherID); err == nil && ok && was == inc {
				r.verified.Store(voucherID, inc)
				return nil
			}
			return core.ErrBusy // its rebuild failed; the next request rebuilds
		}
		select {
		case <-ctx.Done():
			return core.Wrap("recovery: wait for another rebuild", core.CodeUnavailable, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return core.ErrBusy
}

func (r *Guard) failed(voucherID int64, err error) error {
	r.log.Error("rebuild failed", "voucher", voucherID, "err", err)
	if r.obs != nil {
		r.obs.RebuildFailed(voucherID, err)
	}
	return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
}

// requeueStranded hands the queue again the orders the live store named as
// buyers before the fence that neither the queue holds nor the database
// has: the queue's key vanished with its backlog (deleted, evicted), and
// the buyers' hash is the last record of them. The outside review deleted
// a stream holding a backlog: 158 orders answered 200 were lost, their
// buyers overwritten by this rebuild. A buyer's order not in the queue
// is in the database once its consumer commits (the queue is read before
// the database), so only orders that neither has are stranded; one still
// in a consumer's hands is persisted once either way (the store is
// idempotent by order id). Without a requeue, or with a queue that cannot
// list what it holds, nothing is requeued; nor on an operator's reconcile,
// which takes the database and the queue as they are.
func (r *Guard) requeueStranded(ctx context.Context, voucherID int64, before LiveState, inDatabase map[int64]bool, held []core.Order) ([]core.Order, error) {
	if r.requeue == nil || r.queue.Holder == nil || len(before.Buyers) == 0 {
		return nil, nil
	}
	inQueue := make(map[int64]bool, len(held))
	for _, o := range held {
		inQueue[o.ID] = true
	}
	var stranded []core.Order
	for user, order := range before.Buyers {
		if !inDatabase[order] && !inQueue[order] {
			stranded = append(stranded, core.Order{ID: order, UserID: user, VoucherID: voucherID})
		}
	}
	if len(stranded) == 0 {
		return nil, nil
	}
	if err := r.requeue(ctx, stranded); err != nil {
		return nil, err
	}
	r.log.Warn("rebuild: orders the live store named as buyers were in neither the queue nor the database: handed to the queue again",
		"voucher", voucherID, "orders", len(stranded))
	return stranded, nil
}
