package redisreserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/sync/singleflight"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// Config configures a Reserver.
type Config struct {
	// Prefix starts every key. Default DefaultPrefix.
	Prefix string
	// Log receives what a repair finds wrong (nil: discarded).
	Log *slog.Logger
	// Identity tells the Redis incarnation (nil: one that never changes,
	// ""), recorded with each voucher's live state.
	Identity *Identity
	// Shards tag the vouchers' keys; the Handoff's key for a voucher must
	// carry the same tag (Keys.ShardKey). Default one shard.
	Shards core.Shards
	// Handoff is what the script does with a reserved order: the queue's
	// own (core.Capabilities.Handoff). The zero Handoff hands nothing off:
	// the caller publishes the order (core.Capabilities.Publisher).
	Handoff core.Handoff
	// OnReceivers, if set and the Handoff counts receivers, is told how
	// many consumers received each order (0: nobody will persist it).
	OnReceivers func(receivers int64)
	// Coalesce sends concurrent reservations through go-redis's
	// autopipeliner: the scripts of requests that arrive together share one
	// write and one read on one connection instead of one round trip each,
	// which saves syscalls on both sides. Safe because each script is
	// atomic and independent of the others in its batch, and replaying one
	// after a lost reply answers the same order id.
	Coalesce bool
	// Batch > 1: the reservations of one shard that arrive while the
	// shard's previous call is in flight go together in one call of
	// seckill_batch.lua, at most Batch each (batch.go); one that finds no
	// call in flight goes at once. Replaces Coalesce, and keeps WAIT: one
	// per batch, on the batch's connection. 0 or 1: a call per
	// reservation.
	Batch int
	// WaitReplicas > 0: each reservation is followed by WAIT on the same
	// connection (an explicit pipeline to the node that owns the voucher),
	// and one that fewer replicas confirm within WaitTimeout is reported
	// Unconfirmed. Coalesce is bypassed: go-redis's autopipeliner sends
	// WAIT on a connection of its own, where it would confirm nothing.
	WaitReplicas int
	WaitTimeout  time.Duration
	// ShopperRate admits this many reservations per second per shopper and
	// voucher, with a burst of as many (0: no limit). The script checks it,
	// so the limit costs no round trip of its own; over it, Reserve answers
	// core.RateLimited.
	ShopperRate int
	// PayWindow: each reservation is recorded as due for payment this long
	// after it (Keys.PayBy), for ClaimDue; 0 records none.
	PayWindow time.Duration
	// OrderBody is the format of the order the hand-off writes (zero:
	// core.OrderBodyJSON, which every version reads).
	OrderBody core.OrderBody
	// ReplyAllowance: a script reserves only if it runs at least this
	// long before the request's deadline, so that its reply has that long
	// to come back before the request gives up. Without it, a script
	// that waited in a slow Redis's queue ran just before the deadline,
	// reserved, and its shopper was answered 503: an order they never
	// heard of (the contract: a request past its deadline reserves
	// nothing). 0: the deadline itself.
	ReplyAllowance time.Duration
	// Tracer records each batched script call as a span (Batch): the
	// child of a lone member's request span, else linked to each
	// member's. An unbatched call runs in its request's context, where
	// the Redis client's own instrumentation records it. Nil: a tracer
	// that records nothing.
	Tracer trace.Tracer
	// ClockOffset is Redis's clock less this instance's (redisclock): a
	// request's deadline, on this instance's clock, is handed to the
	// script on Redis's, which judges it (nil: the clocks agree). An
	// instance two seconds behind Redis answered every seckill 503.
	ClockOffset func() time.Duration
}

// Reserver is the request path's side of the Redis sale: it runs the
// reservation scripts (batched, borrowing between a voucher's buckets)
// and reads the stock; it implements core.Reserver and core.StockBoard.
// Its upkeep — verification against Redis's incarnation, fences,
// restores, units given back, payment deadlines — is Live's, over the
// same client, keys and caches.
type Reserver struct{ *sale }

// Live is the live store's upkeep (recovery.LiveSale, core.UnitReturner,
// core.Deadlines): what keeps the Redis sale true to MySQL across
// Redis's losses, and what comes back to it after the reservation.
type Live struct{ *sale }

// Live is the reservation's upkeep side.
func (r *Reserver) Live() *Live { return &Live{r.sale} }

// sale is what both sides share: the client, the keys, the scripts and
// the caches of what the vouchers' keys hold.
type sale struct {
	rdb redis.UniversalClient
	// scripter runs the seckill script: rdb, or its autopipeliner.
	scripter redis.Scripter
	cfg      Config
	keys     Keys
	seckill  *redis.Script
	release  *redis.Script
	// handoffArgs is the hand-off command as the script's ARGV[8..].
	handoffArgs []any

	batchersMu sync.Mutex
	batchers   map[int]*batcher // by shard, made on first use

	// bucketCounts: voucher id -> its buckets (core.Voucher.Buckets),
	// which never change: learnt where the voucher's state is written
	// or verified, else read from its window (bucketsOf).
	bucketCounts sync.Map
	// borrowing: one borrow at a time per bucket in this process; the
	// shoppers of a dry bucket who arrive meanwhile share its outcome.
	borrowing singleflight.Group
	// partial: fence token -> the lostBuckets of a rebuild of some of a
	// voucher's buckets (FenceLost), for its Restore.
	partial sync.Map
	names
	// intactBuckets: a bucket's window key -> the incarnation it was found
	// intact in (VerifiedFor).
	intactBuckets sync.Map
	// noEviction: every master said its maxmemory-policy is noeviction
	// when last asked (EvictionIs), so no key of a voucher can vanish
	// alone and the batch skips its whole-check.
	noEviction atomic.Bool
}

var (
	seckillScript    = redis.NewScript(lua.Seckill)
	releaseScript    = redis.NewScript(lua.Release)
	returnUnitScript = redis.NewScript(lua.ReturnUnit)
	takeBackScript   = redis.NewScript(lua.TakeBack)
	claimScript      = redis.NewScript(lua.ClaimDeadlines)
)

// New validates cfg and builds a Reserver. Call Load once at start.
func New(rdb redis.UniversalClient, cfg Config) (*Reserver, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.ClockOffset == nil {
		cfg.ClockOffset = func() time.Duration { return 0 }
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	r := &Reserver{&sale{rdb: rdb, scripter: rdb, cfg: cfg, keys: Keys{Prefix: cfg.Prefix, Shards: cfg.Shards}, seckill: seckillScript, release: releaseScript}}
	if cfg.Identity != nil {
		marks := make([]string, r.keys.shards().Count())
		for s := range marks {
			marks[s] = r.keys.ShardForgets(s)
		}
		cfg.Identity.MarkShards(marks)
	}
	if cfg.Handoff.Command != nil {
		if err := cfg.Handoff.Validate(); err != nil {
			return nil, fmt.Errorf("redisreserve: %w", err)
		}
		for _, a := range cfg.Handoff.Command {
			r.handoffArgs = append(r.handoffArgs, a)
		}
	}
	if cfg.Coalesce {
		ap, err := rdb.AutoPipeline()
		if err != nil {
			return nil, fmt.Errorf("redisreserve: coalesce: %w", err)
		}
		r.scripter = ap
	}
	return r, nil
}

// EvictionIs tells the reservation what Redis said of eviction when last
// asked (the server asks at start and every few seconds). The batch checks
// each voucher's state whole (its buyers plus its stock are its total: one
// HLEN per voucher per call) wherever a master may evict keys, or did not
// say: an eviction takes one key, not a voucher, and an evicted buyers
// hash would sell its buyers again. Where every master says noeviction no
// key vanishes alone (a restart or a loss is another incarnation, which
// rebuilds), and the check is skipped. Until told, it checks.
func (r *Reserver) EvictionIs(st EvictionState) { r.noEviction.Store(!st.MayEvict()) }

// checkWhole is the scripts' flag to check a voucher whole before trusting
// a missing buyer's mark: 1 unless every master said noeviction (then no
// key vanishes but by a deletion, and the check would only cost).
func (r *sale) checkWhole() int {
	if r.noEviction.Load() {
		return 0
	}
	return 1
}

// ForQueue builds the reservation that feeds q: the script runs q's
// hand-off when q declares one (core.Capabilities.Handoff); otherwise q
// must declare a Publisher, returned for the caller to publish
// each reserved order to (core.Seckill does, releasing the reservation if
// the queue refuses). cfg.Handoff is set from q.
func ForQueue(rdb redis.UniversalClient, q core.Queue, cfg Config) (*Reserver, core.Publisher, error) {
	var publisher core.Publisher
	caps := core.CapabilitiesOf(q)
	switch {
	case caps.Handoff != nil:
		cfg.Handoff = *caps.Handoff
	case caps.Publisher != nil:
		cfg.Handoff, publisher = core.Handoff{}, caps.Publisher
	default:
		return nil, nil, fmt.Errorf("redisreserve: queue %s declares neither a Handoff nor a Publisher: nothing could feed it", caps.Name)
	}
	r, err := New(rdb, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("redisreserve: queue %s: %w", caps.Name, err)
	}
	return r, publisher, nil
}

// CheckClusterSlots asks Redis (CLUSTER KEYSLOT) whether all the keys of
// one reservation call hash to one slot, for vouchers of every shard. On a
// Redis Cluster a script whose keys span two slots fails every call with
// CROSSSLOT, so a server finding such a layout refuses to start.
func (r *Reserver) CheckClusterSlots(ctx context.Context) error {
	n := int64(r.keys.shards().Count())
	for v := int64(1); v <= max(32, 2*n); v++ {
		// Each voucher whole, and voucher 1 split into a bucket per shard.
		bucketsOfV := map[bool]int{true: int(n), false: 1}[v == 1]
		for b := range bucketsOfV {
			if err := r.checkSlots(ctx, core.Order{VoucherID: v}, r.keys.Bucket(v, b, bucketsOfV)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSlots: the keys of one reservation in bucket bk share one slot.
func (r *sale) checkSlots(ctx context.Context, o core.Order, bk BucketKeys) error {
	keys, _ := r.scriptArgs(ctx, o, bk)
	slots := map[int64][]string{}
	for _, k := range keys {
		slot, err := r.rdb.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			return fmt.Errorf("redisreserve: cluster keyslot %s: %w", k, err)
		}
		slots[slot] = append(slots[slot], k)
	}
	if len(slots) > 1 {
		return fmt.Errorf("redisreserve: the reservation of voucher %d (bucket %d) touches keys in %d cluster slots %v: "+
			"every key of one script call, the queue key included, must carry the hash tag of the voucher's shard", o.VoucherID, bk.Bucket, len(slots), slots)
	}
	return nil
}

func (r *sale) log() *slog.Logger {
	if r.cfg.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.cfg.Log
}

// Keys exposes the key names (for operators' tools and tests).
func (r *Reserver) Keys() Keys { return r.keys }

// Load puts the scripts into Redis's script cache, so each request is one
// EVALSHA. (redis.Script falls back to EVAL after a SCRIPT FLUSH.)
func (r *Reserver) Load(ctx context.Context) error {
	for _, s := range []*redis.Script{r.seckill, seckillBatchScript, r.release, returnUnitScript, takeBackScript, claimScript, nextIDScript, restoreScript, restoreBuyersScript, steerWindowScript, steerStockScript, unfenceScript, fenceScript,
		pendScript, takeScript, giveScript, readBucketScript} {
		if err := s.Load(ctx, r.rdb).Err(); err != nil {
			return fmt.Errorf("redisreserve: load script: %w", err)
		}
	}
	return nil
}

// Reserve runs seckill.lua for the order, in the shopper's bucket of the
// voucher; a bucket found dry borrows from the others (buckets.go).
func (r *Reserver) Reserve(ctx context.Context, o core.Order) (core.Reservation, error) {
	buckets, err := r.bucketsOf(ctx, o.VoucherID)
	if err != nil {
		return core.Reservation{}, err
	}
	bk := r.bucket(o.VoucherID, core.BucketOf(o.UserID, buckets), buckets)
	res, err := r.reserveIn(ctx, o, bk)
	if res.Result == core.VoucherMissing {
		r.intactBuckets.Delete(bk.Window)
	}
	if err != nil || res.Result != core.SoldOut || buckets == 1 {
		return res, err
	}
	return r.reserveBorrowing(ctx, o, bk, buckets, res)
}

// reserveIn runs the reservation in one bucket.
func (r *sale) reserveIn(ctx context.Context, o core.Order, bk BucketKeys) (core.Reservation, error) {
	if r.cfg.Batch > 1 {
		return r.reserveBatched(ctx, o, bk)
	}
	if r.cfg.WaitReplicas > 0 {
		return r.reserveConfirmed(ctx, o, bk)
	}
	keys, args := r.scriptArgs(ctx, o, bk)
	res, err := r.runSeckill(ctx, keys, args)
	if err != nil {
		return core.Reservation{}, fmt.Errorf("redisreserve: seckill script: %w", err)
	}
	return r.parseReservation(res)
}

// runSeckill runs the script, within ctx even when coalesced: go-redis's
// autopipeliner runs a batch on a context of its own, so a Redis that stops
// answering would hold the request for its read timeout and retries. The
// request gives up at its deadline; the script, should it still run, finds
// the deadline passed and reserves nothing.
func (r *sale) runSeckill(ctx context.Context, keys []string, args []any) ([]any, error) {
	if !r.cfg.Coalesce || ctx.Done() == nil {
		return r.seckill.Run(ctx, r.scripter, keys, args...).Slice()
	}
	type reply struct {
		res []any
		err error
	}
	done := make(chan reply, 1)
	go func() {
		res, err := r.seckill.Run(ctx, r.scripter, keys, args...).Slice()
		done <- reply{res, err}
	}()
	select {
	case rep := <-done:
		return rep.res, rep.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// reserveConfirmed runs the script and WAIT in one pipeline on the
// connection of the node that owns the voucher's keys.
func (r *sale) reserveConfirmed(ctx context.Context, o core.Order, bk BucketKeys) (core.Reservation, error) {
	keys, args := r.scriptArgs(ctx, o, bk)
	res, confirmed, err := r.runThenWait(ctx, r.seckill, keys, args)
	if err != nil {
		return core.Reservation{}, fmt.Errorf("redisreserve: seckill script and WAIT: %w", err)
	}
	reply, err := res.Slice()
	if err != nil {
		return core.Reservation{}, fmt.Errorf("redisreserve: seckill script: %w", err)
	}
	out, err := r.parseReservation(reply)
	if err != nil {
		return core.Reservation{}, err
	}
	out.Unconfirmed = out.Result == core.Reserved && confirmed < int64(r.cfg.WaitReplicas)
	return out, nil
}

// runThenWait runs script, then WAIT, in one pipeline on the connection of
// the node that owns keys[0] (WAIT confirms the writes of its own
// connection only), and returns the script's reply and how many replicas
// confirmed.
func (r *sale) runThenWait(ctx context.Context, script *redis.Script, keys []string, args []any) (*redis.Cmd, int64, error) {
	var node redis.Cmdable = r.rdb
	if c, ok := r.rdb.(*redis.ClusterClient); ok {
		n, err := c.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, 0, fmt.Errorf("node of %s: %w", keys[0], err)
		}
		node = n
	}
	var res, wait *redis.Cmd
	run := func(eval bool) error {
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			if eval {
				res = script.Eval(ctx, p, keys, args...)
			} else {
				res = script.EvalSha(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "WAIT", r.cfg.WaitReplicas, r.cfg.WaitTimeout.Milliseconds())
			return nil
		})
		return err
	}
	err := run(false)
	if err != nil && redis.HasErrorPrefix(res.Err(), "NOSCRIPT") {
		err = run(true) // a Redis that lost its script cache (a failover, a restart)
	}
	if err != nil {
		return nil, 0, err
	}
	confirmed, err := wait.Int64()
	if err != nil {
		return nil, 0, fmt.Errorf("WAIT: %w", err)
	}
	return res, confirmed, nil
}

// scriptArgs lays out KEYS and ARGV as seckill.lua's header describes
// them, for the order's bucket bk; a test holds the two equal.
func (r *sale) scriptArgs(ctx context.Context, o core.Order, bk BucketKeys) (keys []string, args []any) {
	keys = []string{bk.Stock, bk.Window, bk.Orders, r.queueKey(o.VoucherID, bk), bk.Limit(o.UserID), r.payBy(bk.Shard)}
	rate, deadline, payBy := r.terms(ctx, o)
	args = make([]any, 0, 7+len(r.handoffArgs))
	args = append(args, o.UserID, o.ID, r.cfg.OrderBody.Encode(o), rate, deadline, payBy, o.VoucherID)
	return keys, append(args, r.handoffArgs...)
}

// terms are the reservation's shopper limit, deadline and payment
// deadline (unix ms; 0: none), seckill.lua's ARGV[4], [5] and [6].
func (r *sale) terms(ctx context.Context, o core.Order) (rate int, deadline, payBy int64) {
	if d, ok := ctx.Deadline(); ok {
		deadline = d.Add(-r.cfg.ReplyAllowance).Add(r.cfg.ClockOffset()).UnixMilli()
	}
	rate = r.cfg.ShopperRate
	if o.LimitCounted {
		rate = 0 // admit.lua counted this request already
	}
	if r.cfg.PayWindow > 0 {
		payBy = o.CreatedAt.Add(r.cfg.PayWindow).UnixMilli()
	}
	return rate, deadline, payBy
}

// scriptResults maps seckill.lua's return codes (its header lists them)
// onto core's results, by value: neither side's order may drift.
var scriptResults = map[int64]core.ReservationResult{
	0: core.Reserved,
	1: core.VoucherMissing,
	2: core.NotStarted,
	3: core.Ended,
	4: core.SoldOut,
	5: core.AlreadyPurchased,
	6: core.RateLimited,
	7: core.DeadlinePassed,
	8: core.Paused,
}

func (r *sale) parseReservation(res []any) (core.Reservation, error) {
	if len(res) != 3 {
		return core.Reservation{}, fmt.Errorf("redisreserve: seckill script returned %d values, want 3", len(res))
	}
	code, ok1 := res[0].(int64)
	idText, ok2 := res[1].(string)
	// The third value depends on the code: receivers, a retry delay or a
	// distance to the window's edge, as the script's header says.
	n, ok3 := res[2].(int64)
	if !ok1 || !ok2 || !ok3 {
		return core.Reservation{}, fmt.Errorf("redisreserve: seckill script returned %T %T %T", res[0], res[1], res[2])
	}
	result, known := scriptResults[code]
	if !known {
		return core.Reservation{}, fmt.Errorf("redisreserve: seckill script returned unknown code %d", code)
	}
	out := core.Reservation{Result: result}
	if idText != "" {
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil {
			return core.Reservation{}, fmt.Errorf("redisreserve: seckill script returned order id %q", idText)
		}
		out.OrderID = id
	}
	switch out.Result {
	case core.RateLimited:
		out.RetryAfter = time.Duration(n) * time.Millisecond
	case core.NotStarted, core.Ended:
		out.WindowEdge = time.Duration(n) * time.Millisecond
	}
	if out.Result == core.Reserved && n >= 0 && r.cfg.Handoff.CountsReceivers && r.cfg.OnReceivers != nil {
		r.cfg.OnReceivers(n)
	}
	return out, nil
}

// Release runs release.lua: the stock comes back if this order holds it,
// to its buyer's bucket.
func (r *Reserver) Release(ctx context.Context, o core.Order) error {
	bk, err := r.buyerBucket(ctx, o.VoucherID, o.UserID)
	if err != nil {
		return err
	}
	keys := []string{bk.Stock, bk.Orders, bk.Window}
	if err := r.release.Run(ctx, r.rdb, keys, o.UserID, o.ID).Err(); err != nil {
		return fmt.Errorf("redisreserve: release script: %w", err)
	}
	return nil
}

// ReturnUnit runs return_unit.lua (core.UnitReturner): a cancelled
// order's unit back on sale, and its buyer free to buy again, if the
// buyer's mark still names it.
func (r *Live) ReturnUnit(ctx context.Context, o core.Order) (core.ReturnResult, error) {
	return r.returnUnit(ctx, o, 0)
}

// ReturnRefused gives back, once, the unit of an order the database refused
// as its buyer's second (core.PipelineConfig.ReturnRefused): the live stock
// is one more and the buyer's mark names held, the order they have in the
// database (0: removed).
func (r *Live) ReturnRefused(ctx context.Context, o core.Order, held int64) (core.ReturnResult, error) {
	return r.returnUnit(ctx, o, held)
}

// returnUnit runs return_unit.lua on the buyer's bucket, leaving the mark
// naming held (0: removed).
func (r *sale) returnUnit(ctx context.Context, o core.Order, held int64) (core.ReturnResult, error) {
	bk, err := r.buyerBucket(ctx, o.VoucherID, o.UserID)
	if err != nil {
		return 0, err
	}
	keys := []string{bk.Stock, bk.Orders, bk.Window}
	n, err := returnUnitScript.Run(ctx, r.rdb, keys, o.UserID, o.ID, held, r.checkWhole()).Int()
	if err != nil {
		return 0, fmt.Errorf("redisreserve: return unit: %w", err)
	}
	switch n {
	case 1:
		return core.UnitReturned, nil
	case 0:
		return core.NothingToReturn, nil
	}
	return core.ReturnLater, nil
}

// Redrive is the dead letters' side of the live sale
// (deadletters.LiveUnits): before a re-drive persists an order its unit is
// made its own again, and the unit of one the database refuses as its
// buyer's second goes back once.
type Redrive struct{ *sale }

// Redrive is the re-drive's side, over the same client and keys.
func (r *Reserver) Redrive() *Redrive { return &Redrive{r.sale} }

// ReturnRefused is Live's (core.PipelineConfig.ReturnRefused).
func (r *Redrive) ReturnRefused(ctx context.Context, o core.Order, held int64) (core.ReturnResult, error) {
	return r.returnUnit(ctx, o, held)
}

// TakeBack makes each dead-lettered order's unit its own before a
// re-drive persists it (take_back.lua): held already where the buyer's
// mark names it, else taken back from the buyer's bucket where a unit is
// left. One pipeline for all of them (a bulk re-drive takes 500 a step);
// a hot voucher's bucket found dry borrows from the others, one order at
// a time.
func (r *Redrive) TakeBack(ctx context.Context, orders []core.Order) ([]core.TakeBack, error) {
	out := make([]core.TakeBack, len(orders))
	bks := make([]BucketKeys, len(orders))
	for i, o := range orders {
		bk, err := r.buyerBucket(ctx, o.VoucherID, o.UserID)
		if err != nil {
			return nil, err
		}
		bks[i] = bk
	}
	cmds, err := r.takeBackAll(ctx, orders, bks)
	if err != nil {
		return nil, err
	}
	for i, cmd := range cmds {
		res, err := cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("redisreserve: take a unit back: %w", err)
		}
		if out[i] = takeBackOf(res); out[i].Result == core.UnitGone {
			if out[i], err = r.takeBackBorrowing(ctx, orders[i], bks[i]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// takeBackAll runs take_back.lua for each order in one pipeline, loading
// the script first where Redis has forgotten it (a restart).
func (r *sale) takeBackAll(ctx context.Context, orders []core.Order, bks []BucketKeys) ([]*redis.Cmd, error) {
	for try := 0; ; try++ {
		pipe := r.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(orders))
		for i, o := range orders {
			cmds[i] = takeBackScript.EvalSha(ctx, pipe, []string{bks[i].Stock, bks[i].Orders, bks[i].Window}, o.UserID, o.ID, r.checkWhole())
		}
		_, err := pipe.Exec(ctx)
		if err == nil || try > 0 || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return cmds, err
		}
		if err := takeBackScript.Load(ctx, r.rdb).Err(); err != nil {
			return nil, fmt.Errorf("redisreserve: load take_back.lua: %w", err)
		}
	}
}

// takeBackOf reads take_back.lua's answer.
func takeBackOf(res []any) core.TakeBack {
	code, _ := res[0].(int64)
	switch code {
	case 1:
		return core.TakeBack{Result: core.UnitHeld}
	case 2:
		return core.TakeBack{Result: core.UnitTakenBack}
	case 3:
		holder, _ := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
		return core.TakeBack{Result: core.BuyerHoldsAnother, Holder: holder}
	case -1:
		return core.TakeBack{Result: core.TakeBackLater}
	}
	return core.TakeBack{Result: core.UnitGone}
}

// takeBackBorrowing takes an order's unit back after its bucket was found
// dry: the bucket borrows from the others, as a reservation's does, until
// the script answers otherwise or no bucket has a unit to lend.
func (r *sale) takeBackBorrowing(ctx context.Context, o core.Order, bk BucketKeys) (core.TakeBack, error) {
	buckets, err := r.bucketsOf(ctx, o.VoucherID)
	if err != nil || buckets == 1 {
		return core.TakeBack{Result: core.UnitGone}, err
	}
	for idle := 0; idle < idleBorrows; idle++ {
		got, err := r.borrow(ctx, o.VoucherID, bk.Bucket, buckets)
		switch {
		case err != nil:
			return core.TakeBack{}, err
		case got.units == 0 && got.unloaded:
			return core.TakeBack{Result: core.TakeBackLater}, nil
		case got.units == 0 && !got.voided:
			return core.TakeBack{Result: core.UnitGone}, nil
		}
		res, err := takeBackScript.Run(ctx, r.rdb, []string{bk.Stock, bk.Orders, bk.Window}, o.UserID, o.ID, r.checkWhole()).Slice()
		if err != nil {
			return core.TakeBack{}, fmt.Errorf("redisreserve: take a unit back: %w", err)
		}
		if t := takeBackOf(res); t.Result != core.UnitGone {
			return t, nil
		}
	}
	return core.TakeBack{Result: core.UnitGone}, nil
}

// ClaimDue implements core.Deadlines: up to max reservations due for
// payment by now, from every shard, each handed out once
// (claim_deadlines.lua), with PayBy set.
func (r *Live) ClaimDue(ctx context.Context, now time.Time, max int) ([]core.Order, error) {
	var out []core.Order
	for shard := range r.keys.shards().Count() {
		due, err := claimScript.Run(ctx, r.rdb, []string{r.keys.PayBy(shard), r.keys.Deadlines(shard)}, now.UnixMilli(), max).StringSlice()
		if err != nil {
			return out, fmt.Errorf("redisreserve: claim deadlines: %w", err)
		}
		for i := 0; i+1 < len(due); i += 2 {
			o, ok := parseDeadline(due[i])
			ms, err := strconv.ParseFloat(due[i+1], 64) // a legacy score is printed as a double
			if !ok || err != nil {
				r.log().Error("a deadline that does not parse; dropped", "member", due[i], "score", due[i+1])
				continue
			}
			o.PayBy = time.UnixMilli(int64(ms)).UTC()
			out = append(out, o)
		}
	}
	return out, nil
}

// deadlineEntry is the entry of a reservation due for payment at payBy
// (unix ms) in its shard's deadlines list, 'payBy:orderId:userId:voucherId',
// as seckill.lua writes it; "" for none (payBy 0). The batch script takes it
// built: Lua would make it from four strings for every member.
// claim_deadlines.lua cuts payBy off and parseDeadline reads the rest.
func deadlineEntry(payBy int64, o core.Order) string {
	if payBy == 0 {
		return ""
	}
	b := make([]byte, 0, 80)
	b = strconv.AppendInt(b, payBy, 10)
	for _, id := range [3]int64{o.ID, o.UserID, o.VoucherID} {
		b = append(b, ':')
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

// parseDeadline reads 'orderId:userId:voucherId'.
func parseDeadline(m string) (core.Order, bool) {
	parts := strings.Split(m, ":")
	if len(parts) != 3 {
		return core.Order{}, false
	}
	var ids [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n <= 0 {
			return core.Order{}, false
		}
		ids[i] = n
	}
	return core.Order{ID: ids[0], UserID: ids[1], VoucherID: ids[2]}, true
}

// ReservedOrder returns the order the user holds for the voucher.
func (r *Reserver) ReservedOrder(ctx context.Context, userID, voucherID int64) (int64, bool, error) {
	bk, err := r.buyerBucket(ctx, voucherID, userID)
	if err != nil {
		return 0, false, err
	}
	v, err := r.rdb.HGet(ctx, bk.Orders, strconv.FormatInt(userID, 10)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("redisreserve: reserved order: %w", err)
	}
	return v, true, nil
}

// LoadVoucher writes a voucher's stock and window in one transaction per
// bucket, so the script never sees one without the other, with the
// incarnation of Redis they were written in. A voucher in buckets has its
// stock split evenly; bucket 0, whose window names the count, is written
// last, so whoever reads the count finds every bucket. Each window also
// records the server that wrote it and the shard's forgetting mark
// (mark_node.lua; see Reverify), and the voucher's units over all its
// buckets (read_bucket.lua; see RemainingStock).
func (r *Reserver) LoadVoucher(ctx context.Context, v core.Voucher) error {
	inc, err := r.incarnation(ctx)
	if err != nil {
		return fmt.Errorf("redisreserve: load voucher %d: %w", v.ID, err)
	}
	n := v.BucketCount()
	shares := splitStock(v.Stock, n)
	for b := n - 1; b >= 0; b-- {
		bk := r.keys.Bucket(v.ID, b, n)
		_, err = r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, bk.Window, "begin", v.BeginAt.UnixMilli(), "end", v.EndAt.UnixMilli(), "epoch", inc, "total", shares[b], "buckets", n,
				"units", v.Stock, "paused", int(v.Pause))
			p.Set(ctx, bk.Stock, shares[b], 0)
			markNodeScript.Eval(ctx, p, []string{bk.Window, bk.Forgets()})
			return nil
		})
		if err != nil {
			return fmt.Errorf("redisreserve: load voucher %d bucket %d: %w", v.ID, b, err)
		}
	}
	r.learnBuckets(v.ID, n)
	return nil
}

// splitStock splits units over n buckets as evenly as they go.
func splitStock(units int64, n int) []int64 {
	shares := make([]int64, n)
	for b := range shares {
		shares[b] = units / int64(n)
		if int64(b) < units%int64(n) {
			shares[b]++
		}
	}
	return shares
}

// RemainingStock is the live stock count. Of a voucher in buckets: on one
// Redis, their stock and the units in transit between them, read in one
// MULTI (a snapshot); on a cluster, whose buckets are on several masters,
// stockAcrossMasters.
func (r *Reserver) RemainingStock(ctx context.Context, voucherID int64) (int64, error) {
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil {
		return 0, err
	}
	if buckets == 1 {
		n, err := r.rdb.Get(ctx, r.keys.Stock(voucherID)).Int64()
		if errors.Is(err, redis.Nil) {
			return 0, core.ErrVoucherNotFound
		}
		if err != nil {
			return 0, fmt.Errorf("redisreserve: stock: %w", err)
		}
		return n, nil
	}
	all := r.allBuckets(voucherID, buckets)
	if _, clustered := r.rdb.(*redis.ClusterClient); clustered {
		n, err := r.stockAcrossMasters(ctx, all)
		if !errors.Is(err, errNoUnits) {
			return n, err
		}
		// State written before the windows kept units: each bucket's
		// part read at its own moment, which a transfer under way can
		// tear.
		return r.stockSnapshot(ctx, all, r.rdb.Pipelined)
	}
	return r.stockSnapshot(ctx, all, r.rdb.TxPipelined)
}

// stockSnapshot sums the buckets' stock and the units in transit between
// them, read in one pipeline: a snapshot when read is a MULTI.
func (r *sale) stockSnapshot(ctx context.Context, all []BucketKeys, read func(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)) (int64, error) {
	stocks := make([]*redis.StringCmd, len(all))
	transfers := make([]*redis.MapStringStringCmd, len(all))
	_, err := read(ctx, func(p redis.Pipeliner) error {
		for i, bk := range all {
			stocks[i] = p.Get(ctx, bk.Stock)
			transfers[i] = p.HGetAll(ctx, bk.Transfers())
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("redisreserve: stock: %w", err)
	}
	var total int64
	for _, c := range stocks {
		n, err := c.Int64()
		if errors.Is(err, redis.Nil) {
			return 0, core.ErrVoucherNotFound
		}
		if err != nil {
			return 0, fmt.Errorf("redisreserve: stock: %w", err)
		}
		total += n
	}
	return total + r.parseTransfers(all, transfers).inTransit(), nil
}

var admitScript = redis.NewScript(lua.Admit)

// Allow implements core.ShopperLimit: admit.lua, the seckill script's limit
// on the same key.
func (r *Reserver) Allow(ctx context.Context, userID, voucherID int64) (core.Reservation, error) {
	bk, err := r.buyerBucket(ctx, voucherID, userID)
	if err != nil {
		return core.Reservation{}, err
	}
	res, err := admitScript.Run(ctx, r.rdb, []string{bk.Limit(userID), bk.Window}, r.cfg.ShopperRate).Int64Slice()
	if err != nil {
		return core.Reservation{}, fmt.Errorf("redisreserve: admit: %w", err)
	}
	if len(res) == 2 && res[0] == 6 {
		return core.Reservation{Result: core.RateLimited, RetryAfter: time.Duration(res[1]) * time.Millisecond}, nil
	}
	return core.Reservation{Result: core.Reserved}, nil
}

var (
	_ core.Reserver     = (*Reserver)(nil)
	_ core.StockBoard   = (*Reserver)(nil)
	_ core.ShopperLimit = (*Reserver)(nil)
	_ core.UnitReturner = (*Live)(nil)
	_ core.Deadlines    = (*Live)(nil)
)
