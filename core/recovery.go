package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// A sale lives in two places: the database holds the truth (the voucher,
// its stock column, every persisted order) and the live store (Redis) the
// state the reservation runs on. A live store can forget — a restart
// without persistence, a failover to an empty replica — or go back in
// time — a restart from an old snapshot. Recovery notices both and
// rebuilds a voucher's live state from the database and the queue, so a
// voucher that exists is never answered as unknown, and a forgotten or
// stale state never sells.

// LiveSale is the live store's side of recovery (Redis: redisreserve).
type LiveSale interface {
	// Incarnation names the live store's current incarnation: it changes
	// whenever the store restarts or fails over (Redis: the masters'
	// run_id), and is "" where it cannot be told.
	Incarnation(ctx context.Context) (string, error)
	// RefreshIncarnation asks the live store now, not a cached answer.
	RefreshIncarnation(ctx context.Context) (string, error)
	// VerifiedIn returns the incarnation the voucher's live state was last
	// written or rebuilt in; ok is false when the voucher has no live state.
	VerifiedIn(ctx context.Context, voucherID int64) (incarnation string, ok bool, err error)
	// Fence stops every reservation of the voucher until Restore (or the
	// ttl passes, should the rebuilder die): it removes the voucher's
	// stock. ok is false while another rebuild holds the fence.
	Fence(ctx context.Context, voucherID int64, ttl time.Duration) (token string, ok bool, err error)
	// Restore replaces the voucher's live state — window, remaining stock,
	// buyers — records the incarnation, and lifts the fence, all at once.
	Restore(ctx context.Context, s RestoredSale, token string) error
	// Unfence lifts a fence this rebuild holds without restoring (the
	// rebuild failed): the next request rebuilds.
	Unfence(ctx context.Context, voucherID int64, token string) error
	// Fenced reports whether a rebuild of the voucher is under way.
	Fenced(ctx context.Context, voucherID int64) (bool, error)
	// LiveState reads the voucher's live state as it is, for audits.
	LiveState(ctx context.Context, voucherID int64) (LiveState, error)
	// Repair tells the live store of persisted orders it may not know:
	// each buyer unknown to it is marked and one stock taken; a known one
	// changes nothing. It returns the orders whose voucher had no live
	// state (to repair again once the voucher is ensured).
	Repair(ctx context.Context, orders []Order) (again []Order, err error)
}

// LiveState is a voucher's state in the live store.
type LiveState struct {
	// Present: the voucher has stock there (it can be sold).
	Present bool
	Stock   int64
	Buyers  map[int64]int64
	Fenced  bool
	// VerifiedIn is the incarnation recorded with it ("" if none).
	VerifiedIn string
}

// RestoredSale is a voucher's live state as a rebuild computed it.
type RestoredSale struct {
	Voucher     Voucher // Stock: the remaining stock
	Buyers      map[int64]int64
	Incarnation string
}

// SaleLedger is the database's side: what it holds of a sale, read in one
// consistent snapshot.
type SaleLedger interface {
	// SaleSnapshot returns the voucher (Stock: the stock column, initial
	// stock minus persisted orders) and its persisted orders.
	SaleSnapshot(ctx context.Context, voucherID int64) (Voucher, []Order, error)
	// FindVoucher returns ErrVoucherNotFound when there is none.
	FindVoucher(ctx context.Context, voucherID int64) (Voucher, error)
}

// RebuildReport says what one rebuild found and changed.
type RebuildReport struct {
	VoucherID int64
	// Incarnation the state was rebuilt for; Previous the one it had
	// been verified in ("" when the live store had forgotten it).
	Incarnation, Previous string
	// Persisted orders in the database, Held the queue still holds (queued
	// or delivered and unacknowledged), HeldOnly those of them not yet
	// persisted.
	Persisted, Held, HeldOnly int
	// StockBefore is the live stock before (-1: none), StockAfter after;
	// BuyersBefore and BuyersAfter count the buyers.
	StockBefore, StockAfter   int64
	BuyersBefore, BuyersAfter int
	Took                      time.Duration
}

// RecoveryObserver is told of every rebuild, for metrics.
type RecoveryObserver interface {
	Rebuilt(r RebuildReport)
	RebuildFailed(voucherID int64, err error)
}

// Recovery keeps the live sale verified against the live store's
// incarnation and rebuilds what it lost. Every use of a voucher's live
// state on the request path goes through Ensure first.
type Recovery struct {
	live   LiveSale
	ledger SaleLedger
	// holder is the queue's view of the orders it holds; nil for a queue
	// that keeps them only in process memory (or none).
	holder OrderHolder
	log    *slog.Logger
	obs    RecoveryObserver
	// FenceTTL bounds a rebuild; Wait how long a request waits for another
	// instance's rebuild before it is answered busy.
	FenceTTL, Wait time.Duration

	verified sync.Map // voucher id -> incarnation it was verified in
	// forgotten are vouchers to rebuild before their next use whatever
	// their state says (ForgetAll).
	forgotten sync.Map // voucher id -> struct{}
	// memo, if set, forgets each rebuilt voucher (WithMemo).
	memo *AnswerMemo
	// unknown, if set, answers ids the database lacks from memory.
	unknown *UnknownVouchers
	mu      sync.Mutex
	running map[int64]*rebuild
}

type rebuild struct {
	done   chan struct{}
	report RebuildReport
	err    error
}

// NewRecovery wires recovery; holder, log and obs may be nil.
func NewRecovery(live LiveSale, ledger SaleLedger, holder OrderHolder, log *slog.Logger, obs RecoveryObserver) *Recovery {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recovery{live: live, ledger: ledger, holder: holder, log: log, obs: obs,
		FenceTTL: 10 * time.Second, Wait: 2 * time.Second, running: map[int64]*rebuild{}}
}

// WithMemo makes every rebuild tell m (and, through its nudger, every
// instance) that the voucher's stock may have come back.
func (r *Recovery) WithMemo(m *AnswerMemo) *Recovery {
	r.memo = m
	return r
}

// WithUnknown makes Ensure answer voucher ids the database was just found
// without from u, and every look-up remember them there.
func (r *Recovery) WithUnknown(u *UnknownVouchers) *Recovery {
	r.unknown = u
	return r
}

// Trusted reports, from memory alone, whether the voucher was verified in
// the live store's incarnation as this process last saw it: Ensure then
// costs nothing. Otherwise it may look the voucher up, in the live store
// and in the database.
func (r *Recovery) Trusted(ctx context.Context, voucherID int64) bool {
	inc, err := r.live.Incarnation(ctx)
	if err != nil {
		return false
	}
	v, ok := r.verified.Load(voucherID)
	return ok && v.(string) == inc
}

// Verified records that the voucher's live state was just written in the
// current incarnation (a voucher created and loaded now).
func (r *Recovery) Verified(ctx context.Context, voucherID int64) {
	if inc, err := r.live.Incarnation(ctx); err == nil {
		r.verified.Store(voucherID, inc)
	}
}

// Ensure makes sure the voucher's live state belongs to the live store's
// current incarnation, rebuilding it if not. It costs a map lookup when the
// voucher was verified in this incarnation. ErrVoucherNotFound: the
// database has no such voucher either. ErrBusy: another instance is
// rebuilding it and did not finish within Wait.
func (r *Recovery) Ensure(ctx context.Context, voucherID int64) error {
	if r.unknown.Unknown(voucherID) {
		return ErrVoucherNotFound
	}
	if _, forgotten := r.forgotten.LoadAndDelete(voucherID); forgotten {
		return r.Rebuild(ctx, voucherID)
	}
	inc, err := r.live.Incarnation(ctx)
	if err != nil {
		return Wrap("recovery: incarnation", CodeUnavailable, err)
	}
	if v, ok := r.verified.Load(voucherID); ok && v.(string) == inc {
		return nil
	}
	was, ok, err := r.live.VerifiedIn(ctx, voucherID)
	if err != nil {
		return Wrap("recovery: verified in", CodeUnavailable, err)
	}
	if ok && was == inc {
		r.verified.Store(voucherID, inc)
		return nil
	}
	return r.Rebuild(ctx, voucherID)
}

// Recheck is what a read of a voucher's live state calls when it found
// nothing there (no buyer, say): the read alone cannot tell "nothing" from
// "Redis forgot", since Ensure trusts what it verified in this incarnation
// until the incarnation changes. If the voucher's state is gone, or was
// written in another incarnation, it is rebuilt and rebuilt reports true:
// the caller reads again.
func (r *Recovery) Recheck(ctx context.Context, voucherID int64) (rebuilt bool, err error) {
	inc, err := r.live.RefreshIncarnation(ctx)
	if err != nil {
		return false, Wrap("recovery: incarnation", CodeUnavailable, err)
	}
	was, ok, err := r.live.VerifiedIn(ctx, voucherID)
	if err != nil {
		return false, Wrap("recovery: verified in", CodeUnavailable, err)
	}
	if ok && was == inc {
		return false, nil
	}
	r.verified.Delete(voucherID)
	return true, r.Rebuild(ctx, voucherID)
}

// ForgetAll is what a queue reports when part of the live store vanished
// under an unchanged incarnation — its stream or consumer group gone, as an
// evicting Redis does: the orders it held are gone with it, yet their
// buyers still hold their units in a state that looks whole. Every voucher
// this process has verified is rebuilt before its next use, from the
// database and what the queue holds now, so those units go on sale again.
// The orders themselves no rebuild brings back.
func (r *Recovery) ForgetAll() {
	r.verified.Range(func(k, _ any) bool {
		r.forgotten.Store(k, struct{}{})
		r.verified.Delete(k)
		return true
	})
}

// Lost is what the request path calls when the live store answered that it
// has no state for a voucher already ensured (keys deleted under a running
// incarnation): the voucher is rebuilt.
func (r *Recovery) Lost(ctx context.Context, voucherID int64) error {
	r.verified.Delete(voucherID)
	return r.Rebuild(ctx, voucherID)
}

// Rebuild rebuilds the voucher's live state, one rebuild at a time per
// voucher in this process; callers that arrive during one wait for it.
func (r *Recovery) Rebuild(ctx context.Context, voucherID int64) error {
	_, err := r.run(ctx, voucherID, false)
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
func (r *Recovery) Reconcile(ctx context.Context, voucherID int64) (RebuildReport, error) {
	return r.run(ctx, voucherID, true)
}

// ErrNotReconcilable: see Reconcile.
var ErrNotReconcilable = E(CodeNotReconcilable,
	"this backend cannot list the orders it holds, and some of this voucher's are reserved and not yet persisted: retry once they are")

func (r *Recovery) run(ctx context.Context, voucherID int64, operator bool) (RebuildReport, error) {
	r.mu.Lock()
	b, ok := r.running[voucherID]
	if !ok {
		// The rebuild is no caller's: it runs to its own deadline, shorter
		// than the fence, whoever gives up waiting for it. A request that
		// started it waits no longer than its own deadline.
		b = &rebuild{done: make(chan struct{})}
		r.running[voucherID] = b
		go func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.FenceTTL/2)
			defer cancel()
			b.report, b.err = r.rebuild(rctx, voucherID, operator)
			r.mu.Lock()
			delete(r.running, voucherID)
			r.mu.Unlock()
			close(b.done)
		}()
	}
	r.mu.Unlock()
	select {
	case <-b.done:
		err := b.err
		if !operator && errors.Is(err, ErrNotReconcilable) {
			// An operator's reconcile refused, and restored the voucher as
			// a rebuild of the request path would have.
			err = nil
		}
		if ok {
			// Another caller's rebuild: its report is that caller's.
			return RebuildReport{VoucherID: voucherID}, err
		}
		return b.report, err
	case <-ctx.Done():
		return RebuildReport{VoucherID: voucherID}, Wrap("recovery: waiting for the rebuild", CodeUnavailable, ctx.Err())
	}
}

func (r *Recovery) rebuild(ctx context.Context, voucherID int64, operator bool) (RebuildReport, error) {
	start := time.Now()
	// A voucher the database does not have is not fenced: requests for
	// made-up ids leave nothing behind in Redis.
	if _, err := r.unknown.Find(ctx, voucherID, r.ledger.FindVoucher); err != nil {
		if errors.Is(err, ErrVoucherNotFound) {
			return RebuildReport{}, err
		}
		return RebuildReport{}, r.failed(voucherID, Wrap("recovery: find voucher", CodeUnavailable, err))
	}
	before, err := r.live.LiveState(ctx, voucherID)
	if err != nil {
		return RebuildReport{}, r.failed(voucherID, Wrap("recovery: live state", CodeUnavailable, err))
	}
	token, ok, err := r.live.Fence(ctx, voucherID, r.FenceTTL)
	if err != nil {
		return RebuildReport{}, r.failed(voucherID, Wrap("recovery: fence", CodeUnavailable, err))
	}
	if !ok {
		return RebuildReport{VoucherID: voucherID}, r.waitForOther(ctx, voucherID)
	}
	report, err := r.rebuildFenced(ctx, voucherID, token, start, before, operator)
	if err != nil && !errors.Is(err, ErrVoucherNotFound) && !errors.Is(err, ErrNotReconcilable) {
		if uerr := r.live.Unfence(ctx, voucherID, token); uerr != nil {
			r.log.Warn("rebuild: could not lift the fence; it expires on its own", "voucher", voucherID, "err", uerr)
		}
	}
	return report, err
}

func (r *Recovery) rebuildFenced(ctx context.Context, voucherID int64, token string, start time.Time, before LiveState, operator bool) (RebuildReport, error) {
	inc, err := r.live.Incarnation(ctx)
	if err != nil {
		return RebuildReport{}, r.failed(voucherID, Wrap("recovery: incarnation", CodeUnavailable, err))
	}
	was := before.VerifiedIn
	// The queue is read before the database: an order acknowledged in
	// between was committed before the database is read, so every order is
	// seen at least once, and the union by id counts it once.
	var held []Order
	if r.holder != nil {
		if held, err = r.holder.HeldOrders(ctx, voucherID); err != nil {
			return RebuildReport{}, r.failed(voucherID, Wrap("recovery: held orders", CodeUnavailable, err))
		}
	} else {
		// A queue that cannot list what it holds: the live store's buyers,
		// read under the fence (no reservation can add one now), stand for
		// it. Those the database lacks are in a consumer's hands (or lost).
		fenced, err := r.live.LiveState(ctx, voucherID)
		if err != nil {
			return RebuildReport{}, r.failed(voucherID, Wrap("recovery: live state", CodeUnavailable, err))
		}
		for user, order := range fenced.Buyers {
			held = append(held, Order{ID: order, UserID: user, VoucherID: voucherID})
		}
	}
	v, persisted, err := r.ledger.SaleSnapshot(ctx, voucherID)
	if errors.Is(err, ErrVoucherNotFound) {
		return RebuildReport{}, ErrVoucherNotFound // the fence expires on its own: nothing to restore
	}
	if err != nil {
		return RebuildReport{}, r.failed(voucherID, Wrap("recovery: sale snapshot", CodeUnavailable, err))
	}
	buyers := make(map[int64]int64, len(persisted)+len(held))
	ids := make(map[int64]bool, len(persisted))
	for _, o := range persisted {
		buyers[o.UserID], ids[o.ID] = o.ID, true
	}
	heldOnly := 0
	for _, o := range held {
		if ids[o.ID] {
			continue
		}
		if other, ok := buyers[o.UserID]; ok && other != o.ID {
			// The store will refuse it (buyer_holds_another); it takes no stock.
			r.log.Error("rebuild: a held order's buyer already has another order of the voucher",
				"voucher", voucherID, "user", o.UserID, "order", o.ID, "other", other)
			continue
		}
		buyers[o.UserID] = o.ID
		ids[o.ID] = true
		heldOnly++
	}
	// An operator's reconcile that cannot tell the orders in consumers'
	// hands from lost ones is refused, after restoring what it read under
	// the fence — those orders' buyers kept — so the sale goes on as if
	// the request path had rebuilt it.
	refuse := operator && r.holder == nil && heldOnly > 0
	report := RebuildReport{VoucherID: voucherID, Incarnation: inc, Previous: was, Persisted: len(persisted),
		Held: len(held), HeldOnly: heldOnly, StockBefore: -1, BuyersBefore: len(before.Buyers), BuyersAfter: len(buyers)}
	if before.Present {
		report.StockBefore = before.Stock
	}
	remaining := v.Stock - int64(heldOnly)
	if remaining < 0 {
		r.log.Error("rebuild: the queue holds more unpersisted orders than the database has stock",
			"voucher", voucherID, "stock_column", v.Stock, "held_unpersisted", heldOnly)
		remaining = 0
	}
	v.Stock = remaining
	if err := r.live.Restore(ctx, RestoredSale{Voucher: v, Buyers: buyers, Incarnation: inc}, token); err != nil {
		return RebuildReport{}, r.failed(voucherID, Wrap("recovery: restore", CodeUnavailable, err))
	}
	r.verified.Store(voucherID, inc)
	if r.memo != nil {
		// The rebuilt stock may be more than was remembered, here and on
		// every other instance.
		if err := r.memo.StockBack(ctx, voucherID); err != nil {
			r.log.Warn("rebuild: could not nudge the other instances; their memo of the voucher lapses on its own", "voucher", voucherID, "err", err)
		}
	}
	report.StockAfter, report.Took = remaining, time.Since(start)
	if refuse {
		r.log.Warn("reconcile refused: orders of the voucher are reserved and not yet persisted, and the queue cannot list them",
			"voucher", voucherID, "unpersisted", heldOnly)
		return report, ErrNotReconcilable
	}
	r.log.Warn("rebuilt a voucher's live state from the database and the queue",
		"voucher", voucherID, "incarnation", inc, "previous", was, "persisted", report.Persisted,
		"held", report.Held, "held_unpersisted", heldOnly, "stock_before", report.StockBefore, "stock", remaining,
		"buyers_before", report.BuyersBefore, "buyers", report.BuyersAfter, "took", report.Took)
	if r.obs != nil {
		r.obs.Rebuilt(report)
	}
	return report, nil
}

// waitForOther waits for another instance's rebuild of the voucher.
func (r *Recovery) waitForOther(ctx context.Context, voucherID int64) error {
	deadline := time.Now().Add(r.Wait)
	for time.Now().Before(deadline) {
		fenced, err := r.live.Fenced(ctx, voucherID)
		if err != nil {
			return Wrap("recovery: fence", CodeUnavailable, err)
		}
		if !fenced {
			inc, err := r.live.Incarnation(ctx)
			if err != nil {
				return Wrap("recovery: incarnation", CodeUnavailable, err)
			}
			if was, ok, err := r.live.VerifiedIn(ctx, voucherID); err == nil && ok && was == inc {
				r.verified.Store(voucherID, inc)
				return nil
			}
			return ErrBusy // its rebuild failed; the next request rebuilds
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ErrBusy
}

func (r *Recovery) failed(voucherID int64, err error) error {
	r.log.Error("rebuild failed", "voucher", voucherID, "err", err)
	if r.obs != nil {
		r.obs.RebuildFailed(voucherID, err)
	}
	return fmt.Errorf("rebuild voucher %d: %w", voucherID, err)
}

// Audit is a voucher's live state set against the database and the queue.
type Audit struct {
	VoucherID int64
	// Incarnation of the live store now.
	Incarnation string
	Live        LiveState
	// DatabaseStock is the stock column, DatabaseOrders the persisted
	// orders.
	DatabaseStock  int64
	DatabaseOrders int
	// QueueHolds: the queue can tell what it holds (OrderHolder); Held is
	// then the voucher's orders it holds, HeldUnpersisted those not yet in
	// the database.
	QueueHolds            bool
	Held, HeldUnpersisted int
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
func (r *Recovery) Audit(ctx context.Context, voucherID int64) (Audit, error) {
	a := Audit{VoucherID: voucherID}
	var err error
	if a.Incarnation, err = r.live.Incarnation(ctx); err != nil {
		return a, Wrap("audit: incarnation", CodeUnavailable, err)
	}
	var held []Order
	if r.holder != nil {
		a.QueueHolds = true
		if held, err = r.holder.HeldOrders(ctx, voucherID); err != nil {
			return a, Wrap("audit: held orders", CodeUnavailable, err)
		}
	}
	v, persisted, err := r.ledger.SaleSnapshot(ctx, voucherID)
	if err != nil {
		return a, err
	}
	if a.Live, err = r.live.LiveState(ctx, voucherID); err != nil {
		return a, Wrap("audit: live state", CodeUnavailable, err)
	}
	a.DatabaseStock, a.DatabaseOrders, a.Held = v.Stock, len(persisted), len(held)
	want := make(map[int64]int64, len(persisted)+len(held))
	for _, o := range persisted {
		want[o.UserID] = o.ID
	}
	for _, o := range held {
		if _, ok := want[o.UserID]; !ok {
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
			a.Differences = append(a.Differences, fmt.Sprintf("stock: live %d, expected %d (database %d minus %d held, unpersisted)", a.Live.Stock, a.ExpectedStock, v.Stock, a.HeldUnpersisted))
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

// Incarnation is the live store's incarnation now (cached).
func (r *Recovery) Incarnation(ctx context.Context) (string, error) { return r.live.Incarnation(ctx) }

// RepairAfter tells the live store of orders just persisted that were read
// from the queue in incarnation `readIn`, if the live store has become
// another incarnation since: a rebuild in between could not see them (they
// were neither in the new queue nor yet in the database), so without this
// their stock would be sold again. A repair is idempotent; it waits for a
// rebuild under way, and gives up after repairTimeout with an error.
func (r *Recovery) RepairAfter(ctx context.Context, readIn string, orders []Order) error {
	if len(orders) == 0 {
		return nil
	}
	now, err := r.live.RefreshIncarnation(ctx)
	if err != nil {
		return Wrap("repair: incarnation", CodeUnavailable, err)
	}
	if now == readIn {
		return nil
	}
	deadline := time.Now().Add(repairTimeout)
	todo := orders
	for {
		vouchers := map[int64]bool{}
		for _, o := range todo {
			vouchers[o.VoucherID] = true
		}
		for v := range vouchers {
			if err := r.Ensure(ctx, v); err != nil && !errors.Is(err, ErrBusy) {
				return fmt.Errorf("repair: ensure voucher %d: %w", v, err)
			}
		}
		again, err := r.live.Repair(ctx, todo)
		if err != nil {
			return Wrap("repair", CodeUnavailable, err)
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
		time.Sleep(50 * time.Millisecond)
	}
}

// repairTimeout bounds a repair's wait for rebuilds.
const repairTimeout = 15 * time.Second
