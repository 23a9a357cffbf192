// Package recovery keeps a sale's live state true to its database.
//
// A sale lives in two places: the database holds the truth (the voucher,
// its stock column, every persisted order) and the live store (Redis) the
// state the reservation runs on. A live store can forget — a restart
// without persistence, a failover to an empty replica — or go back in
// time — a restart from an old snapshot. A Guard notices both and
// rebuilds a voucher's live state from the database and the queue, so a
// voucher that exists is never answered as unknown, and a forgotten or
// stale state never sells.
//
// The order flow meets it only as core.LiveGuard. What recovery needs of
// the live store is LiveSale, whose optional parts are declared as data
// (LiveFeatures); of the database, Ledger; of the queue, what it declares
// in core.Capabilities.
package recovery

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-lab/seckill/core"
)

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
	// DrainedIn returns the incarnation in which the queue was last found
	// holding no order (MarkDrained); ok is false if it never was. It is
	// kept in the live store itself, so it is lost with the state it
	// vouches for; see HoldingProbe.
	DrainedIn(ctx context.Context) (incarnation string, ok bool, err error)
	// MarkDrained records that the queue was found holding no order in
	// the incarnation.
	MarkDrained(ctx context.Context, incarnation string) error
	// Repair tells the live store of persisted orders it may not know:
	// each buyer unknown to it is marked and one stock taken; a known one
	// changes nothing. It returns the orders whose voucher had no live
	// state (to repair again once the voucher is ensured).
	Repair(ctx context.Context, orders []core.Order) (again []core.Order, err error)
	// Features declare what the live store can do beyond these methods,
	// read once when recovery is built.
	Features() LiveFeatures
}

// LiveFeatures declare a live store's optional parts as data, the way
// Capabilities declare a queue's: a nil field is a part it does not have,
// and recovery does without it. Each is the live store itself where it
// has the part (Redis Cluster's vocabulary — masters, buckets — stays
// behind these interfaces).
type LiveFeatures struct {
	Reverifier      Reverifier
	Scoped          ScopedIncarnation
	PartialFencer   PartialFencer
	ShopperVerifier ShopperVerifier
}

// Reverifier is the part of a LiveSale that can tell, for a voucher verified in an
// earlier incarnation was (VerifiedIn's answer), that the change of
// incarnation did not touch it (Redis Cluster: another master restarted;
// the voucher's own masters are the servers that wrote its state), and
// record it verified in inc without a rebuild. false: it must be rebuilt.
type Reverifier interface {
	Reverify(ctx context.Context, voucherID int64, was, inc string) (bool, error)
}

// ScopedIncarnation is the part of a LiveSale that can tell, while its incarnation
// cannot be read whole (Redis Cluster: a master out of reach), that orders
// read in incarnation readIn need no repair: the servers that hold their
// vouchers are servers of readIn and recorded no forgetting since, so no
// rebuild of those vouchers since readIn could have missed them — the
// check the whole incarnation makes, for the masters these orders are on.
// false: it cannot tell (a master of theirs is out of reach too, changed,
// or forgot), and the repair waits for the whole incarnation.
type ScopedIncarnation interface {
	Unaffected(ctx context.Context, readIn string, orders []core.Order) (bool, error)
}

// PartialFencer is the part of a LiveSale that can rebuild only the part of a voucher
// a change of incarnation lost (Redis Cluster: the buckets on a master that
// restarted): FenceLost fences those parts and freezes the others (the
// reservation still sells from them; nothing moves between parts), and
// the Restore that follows writes only the lost parts, from the same
// RestoredSale a whole rebuild computes. With nothing intact (or nothing
// lost) it fences the whole voucher, as Fence does. An
// operator's Reconcile always rebuilds whole.
type PartialFencer interface {
	FenceLost(ctx context.Context, voucherID int64, ttl time.Duration) (token string, ok bool, err error)
}

// ShopperVerifier is the part of a LiveSale that can verify the part of a voucher a
// shopper buys from alone (Redis: the shopper's bucket of a voucher in
// buckets): intact in incarnation inc — the server that wrote it still
// holds it, nothing forgotten since, whole, not fenced — though the
// voucher as a whole is not (another bucket is lost, or being rebuilt).
// false for a voucher in one part: Ensure verifies it whole.
type ShopperVerifier interface {
	VerifiedFor(ctx context.Context, voucherID, userID int64, inc string) (bool, error)
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
	Voucher     core.Voucher // Stock: the remaining stock
	Buyers      map[int64]int64
	Incarnation string
}

// Ledger is the database's side: what it holds of a sale, read in one
// consistent snapshot.
type Ledger interface {
	// SaleSnapshot returns, in one consistent snapshot, the voucher
	// (Stock: the stock column, initial stock minus the live orders), its
	// live persisted orders (created or paid: the ones holding a unit),
	// and the statuses the database has of the orders among also (the
	// queue's held orders: one it has as cancelled is no buyer). It reads
	// what is live, never every order the voucher ever took: a soak of
	// 119,669 orders, mostly cancelled, spiked the heap to 90 MB at each
	// audit when every row was read.
	SaleSnapshot(ctx context.Context, voucherID int64, also []int64) (core.Voucher, []core.Order, map[int64]core.OrderStatus, error)
	// FindVoucher returns ErrVoucherNotFound when there is none.
	FindVoucher(ctx context.Context, voucherID int64) (core.Voucher, error)
	// OrderStatuses tells the status of each of these orders the database
	// has (an order it lacks is not in the map).
	OrderStatuses(ctx context.Context, orderIDs []int64) (map[int64]core.OrderStatus, error)
	// LetteredOrders are the voucher's orders its open dead letters hold
	// a unit for: a consumer gave up on them (stock_anomaly,
	// max_deliveries, id_collision), the shopper was told 200, and until
	// an operator re-drives or discards the letter, its unit and its
	// buyer's mark are the letter's. Not buyer_holds_another (its unit
	// went back when it was dead-lettered), poison or unauthenticated
	// (no order of ours).
	LetteredOrders(ctx context.Context, voucherID int64) ([]core.Order, error)
}

// Observer is told of every rebuild, for metrics.
type Observer interface {
	Rebuilt(r Report)
	RebuildFailed(voucherID int64, err error)
}

// Guard keeps the live sale verified against the live store's
// incarnation and rebuilds what it lost. Every use of a voucher's live
// state on the request path goes through Ensure first.
type Guard struct {
	live     LiveSale
	features LiveFeatures
	ledger   Ledger
	// queue is what the queue declares: Holder, its view of the orders it
	// holds (nil for a queue that keeps them only in process memory, or
	// none); Holding, for a queue without a holder that outlives the live
	// store, whether it holds any order (nil: none such).
	queue core.Capabilities
	// requeue hands orders to the queue again (nil: it cannot).
	requeue func(ctx context.Context, orders []core.Order) error
	// buckets learns each rebuilt voucher's bucket count (nil: none).
	buckets core.BucketBoard
	// drainedIn is the incarnation this process last saw the queue
	// drained in (see awaitDrained).
	drainedIn atomic.Pointer[string]
	log       *slog.Logger
	obs       Observer
	// fenceTTL bounds a rebuild; wait how long a request waits for another
	// instance's rebuild before it is answered busy.
	fenceTTL, wait time.Duration

	verified sync.Map // voucher id -> incarnation it was verified in
	// verifying: voucher ids whose verification EnsureShopper started.
	verifying sync.Map
	// memo forgets each rebuilt voucher.
	memo *core.AnswerMemo
	// unknown, if set, answers ids the database lacks from memory.
	unknown *core.UnknownVouchers
	inFlight
}

// inFlight are the rebuilds of this process: those running, and the
// vouchers whose last one failed (held off a while: backOff).
type inFlight struct {
	mu      sync.Mutex
	running map[int64]*rebuild
	failing map[int64]failure
}

type rebuild struct {
	done   chan struct{}
	report Report
	err    error
}

// Config is what recovery is made of. Zero durations take the
// defaults.
type Config struct {
	// Live is the live store, Ledger the database; both required.
	Live   LiveSale
	Ledger Ledger
	// Buckets, if set, is told each rebuilt voucher's bucket count, read
	// from the database (the reservation's side, which shards a voucher's
	// keys by it).
	Buckets core.BucketBoard
	// Queue is what the queue declares (CapabilitiesOf). Guard reads
	// Holder, which lists the orders the queue holds (nil: a queue that
	// cannot; see Reconcile), with BucketLister; and Holding, which for a
	// queue without a Holder whose orders outlive the live store
	// (RabbitMQ) tells whether it holds any: the first rebuild of each
	// incarnation waits until it holds none (see HoldingProbe).
	Queue core.Capabilities
	// Requeue, if set, hands orders to the queue again, as the reservation
	// did. A rebuild calls it for the orders the live store names as
	// buyers that neither the queue holds nor the database has — the
	// queue's key deleted or evicted with its backlog — before it
	// overwrites the buyers that name them: they are persisted after all,
	// their units stay sold. Without it they are lost, and their units go
	// back on sale.
	Requeue func(ctx context.Context, orders []core.Order) error
	// Memo is told that a rebuilt voucher's stock may have come back (and,
	// through its nudger, every instance); nil: a memo of none.
	Memo *core.AnswerMemo
	// Unknown answers voucher ids the database was just found without, and
	// every look-up remembers them there (nil: every id is looked up).
	Unknown *core.UnknownVouchers
	// FenceTTL bounds a rebuild (default 10 s; its own deadline is half);
	// Wait is how long a request waits for another instance's rebuild
	// before it is answered busy (default 2 s).
	FenceTTL, Wait time.Duration
	Log            *slog.Logger
	Observer       Observer
}

// New builds recovery, whole: it panics without Live or Ledger
// (a wiring mistake, found at start).
func New(cfg Config) *Guard {
	if cfg.Live == nil || cfg.Ledger == nil {
		panic("core: New needs Live and a Ledger")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Memo == nil {
		cfg.Memo = core.NewAnswerMemo(0, nil)
	}
	if cfg.FenceTTL <= 0 {
		cfg.FenceTTL = 10 * time.Second
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 2 * time.Second
	}
	return &Guard{live: cfg.Live, features: cfg.Live.Features(), ledger: cfg.Ledger, queue: cfg.Queue, requeue: cfg.Requeue, buckets: cfg.Buckets, log: cfg.Log, obs: cfg.Observer,
		memo: cfg.Memo, unknown: cfg.Unknown, fenceTTL: cfg.FenceTTL, wait: cfg.Wait, inFlight: inFlight{running: map[int64]*rebuild{}, failing: map[int64]failure{}}}
}

// Trusted reports, from memory alone, whether the voucher was verified in
// the live store's incarnation as this process last saw it: Ensure then
// costs nothing. Otherwise it may look the voucher up, in the live store
// and in the database.
func (r *Guard) Trusted(ctx context.Context, voucherID int64) bool {
	inc, err := r.live.Incarnation(ctx)
	if err != nil {
		return false
	}
	v, ok := r.verified.Load(voucherID)
	return ok && v.(string) == inc
}

// Verified records that the voucher's live state was just written in the
// current incarnation (a voucher created and loaded now).
func (r *Guard) Verified(ctx context.Context, voucherID int64) {
	if inc, err := r.live.Incarnation(ctx); err == nil {
		r.verified.Store(voucherID, inc)
	}
}

// Ensure makes sure the voucher's live state belongs to the live store's
// current incarnation, rebuilding it if not. It costs a map lookup when the
// voucher was verified in this incarnation. ErrVoucherNotFound: the
// database has no such voucher either. ErrBusy: another instance is
// rebuilding it and did not finish within Wait.
func (r *Guard) Ensure(ctx context.Context, voucherID int64, p core.Patience) error {
	if r.unknown.Unknown(voucherID) {
		return core.ErrVoucherNotFound
	}
	inc, err := r.live.Incarnation(ctx)
	if err != nil {
		return core.Wrap("recovery: incarnation", core.CodeUnavailable, err)
	}
	if v, ok := r.verified.Load(voucherID); ok && v.(string) == inc {
		return nil
	}
	was, ok, err := r.live.VerifiedIn(ctx, voucherID)
	if err != nil {
		return core.Wrap("recovery: verified in", core.CodeUnavailable, err)
	}
	if ok && was != inc {
		if ok, err = r.reverify(ctx, voucherID, was, inc); err != nil {
			return err
		}
		was = inc
	}
	if ok && was == inc {
		r.verified.Store(voucherID, inc)
		return nil
	}
	_, err = r.run(ctx, voucherID, p, asRebuild)
	return err
}

// EnsureShopper is Ensure for a shopper about to buy: when the voucher
// needs a rebuild but the part the shopper buys from is intact (a voucher
// in buckets that lost only the buckets of a restarted master), the
// shopper goes on at once while the rebuild runs, rather than wait for it:
// one order per user and the stock are that part's own, and the rebuild
// counts nothing a sale there changes. A shopper of a lost part waits, as
// Ensure does.
func (r *Guard) EnsureShopper(ctx context.Context, voucherID, userID int64) error {
	sv := r.features.ShopperVerifier
	if sv == nil || r.unknown.Unknown(voucherID) {
		return r.Ensure(ctx, voucherID, core.Wait)
	}
	inc, err := r.live.Incarnation(ctx)
	if err != nil {
		return core.Wrap("recovery: incarnation", core.CodeUnavailable, err)
	}
	if v, ok := r.verified.Load(voucherID); ok && v.(string) == inc {
		return nil
	}
	if ok, err := sv.VerifiedFor(ctx, voucherID, userID, inc); err == nil && ok {
		// Verify the voucher (a rebuild if it needs one) in the
		// background, one at a time: this shopper does not wait for it.
		if _, busy := r.verifying.LoadOrStore(voucherID, true); !busy {
			go func() {
				defer r.verifying.Delete(voucherID)
				vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.fenceTTL)
				defer cancel()
				if err := r.Ensure(vctx, voucherID, core.Wait); err != nil && !errors.Is(err, core.ErrBusy) {
					r.log.Warn("verifying a voucher whose shopper's part was intact", "voucher", voucherID, "err", err)
				}
			}()
		}
		return nil
	}
	return r.Ensure(ctx, voucherID, core.Wait)
}

// Recheck is what a read of a voucher's live state calls when it found
// nothing there (no buyer, say): the read alone cannot tell "nothing" from
// "Redis forgot", since Ensure trusts what it verified in this incarnation
// until the incarnation changes. If the voucher's state is gone, or was
// written in another incarnation, it is rebuilt and rebuilt reports true:
// the caller reads again.
func (r *Guard) Recheck(ctx context.Context, voucherID int64, p core.Patience) (rebuilt bool, err error) {
	inc, err := r.live.RefreshIncarnation(ctx)
	if err != nil {
		return false, core.Wrap("recovery: incarnation", core.CodeUnavailable, err)
	}
	was, ok, err := r.live.VerifiedIn(ctx, voucherID)
	if err != nil {
		return false, core.Wrap("recovery: verified in", core.CodeUnavailable, err)
	}
	if ok && was != inc {
		if ok, err = r.reverify(ctx, voucherID, was, inc); err != nil {
			return false, err
		}
		was = inc
	}
	if ok && was == inc {
		return false, nil
	}
	r.verified.Delete(voucherID)
	_, err = r.run(ctx, voucherID, p, asRebuild)
	return true, err
}

// reverify asks a live store that can tell (Reverifier) whether the
// voucher's state, verified in an earlier incarnation, is untouched by the
// change to inc: then it is verified in inc without a rebuild.
func (r *Guard) reverify(ctx context.Context, voucherID int64, was, inc string) (bool, error) {
	rv := r.features.Reverifier
	if rv == nil {
		return false, nil
	}
	ok, err := rv.Reverify(ctx, voucherID, was, inc)
	if err != nil {
		return false, core.Wrap("recovery: reverify", core.CodeUnavailable, err)
	}
	if ok {
		r.log.Debug("carried a voucher's live state over to a new incarnation: its masters did not change", "voucher", voucherID, "incarnation", inc)
	}
	return ok, nil
}

// Lost is what the request path calls when the live store answered that it
// has no state for a voucher already ensured (keys deleted under a running
// incarnation): the voucher is rebuilt.
func (r *Guard) Lost(ctx context.Context, voucherID int64, p core.Patience) error {
	r.verified.Delete(voucherID)
	_, err := r.run(ctx, voucherID, p, asRebuild)
	return err
}

// Incarnation is the live store's incarnation now (cached).
func (r *Guard) Incarnation(ctx context.Context) (string, error) { return r.live.Incarnation(ctx) }
