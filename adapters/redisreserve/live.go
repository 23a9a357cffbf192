package redisreserve

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
	"github.com/seckill-lab/seckill/lua"
)

// The Reserver is also the live side of recovery (recovery.LiveSale): each
// voucher's window hash records the incarnation of Redis (Identity) its
// state was written in, a rebuild fences the voucher by removing its stock
// while it holds the fence (two fields of the window hash: see
// fence_voucher.lua), and restore_voucher.lua writes the rebuilt state and
// lifts the fence at once.

var (
	fenceScript         = redis.NewScript(lua.FenceVoucher)
	restoreScript       = redis.NewScript(lua.RestoreVoucher)
	restoreBuyersScript = redis.NewScript(lua.RestoreBuyers)
	unfenceScript       = redis.NewScript(lua.Unfence)
	reverifyScript      = redis.NewScript(lua.ReverifyVoucher)
	shardIdentityScript = redis.NewScript(lua.ShardIdentity)
	markNodeScript      = redis.NewScript(lua.MarkNode)
)

// Incarnation implements recovery.LiveSale.
func (r *Live) Incarnation(ctx context.Context) (string, error) { return r.incarnation(ctx) }

// incarnation is Redis's incarnation as the Identity tells it ("" without
// one).
func (r *sale) incarnation(ctx context.Context) (string, error) {
	if r.cfg.Identity == nil {
		return "", nil
	}
	return r.cfg.Identity.Current(ctx)
}

// VerifiedIn implements recovery.LiveSale: the incarnation recorded with the
// voucher's window, if its state is whole: in every bucket the stock
// exists, the buyers and the stock left add up to the window's total (a
// Redis that evicts keys can drop one of them under an unchanged run_id),
// and the incarnation is the same.
func (r *Live) VerifiedIn(ctx context.Context, voucherID int64) (string, bool, error) {
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil {
		return "", false, err
	}
	all := r.allBuckets(voucherID, buckets)
	stock := make([]*redis.StringCmd, len(all))
	window := make([]*redis.SliceCmd, len(all))
	buyers := make([]*redis.IntCmd, len(all))
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, bk := range all {
			stock[i] = p.Get(ctx, bk.Stock)
			window[i] = p.HMGet(ctx, bk.Window, "epoch", "total")
			buyers[i] = p.HLen(ctx, bk.Orders)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", false, fmt.Errorf("redisreserve: verified in: %w", err)
	}
	var epoch string
	for i := range all {
		left, serr := stock[i].Int64()
		e, ok := window[i].Val()[0].(string)
		if serr != nil || !ok || (i > 0 && e != epoch) {
			return "", false, nil
		}
		epoch = e
		if total, ok := window[i].Val()[1].(string); ok {
			if n, err := strconv.ParseInt(total, 10, 64); err == nil && buyers[i].Val()+left != n {
				return "", false, nil
			}
		}
	}
	return epoch, true, nil
}

// Reverify implements recovery.Reverifier: a voucher verified in an earlier
// incarnation is carried over to inc without a rebuild when every bucket's
// master is the very server that wrote the bucket's state and recorded no
// forgetting since (reverify_voucher.lua asks it its run_id, and reads
// its shard's forgetting mark, in the same step). On a cluster, one
// master's restart or failover then rebuilds only the vouchers (and
// buckets) it held, not every voucher of the sale. On one Redis every
// change of incarnation is a change of the one master: nothing is carried
// over.
//
// was is the epoch VerifiedIn found in every bucket; each bucket's step
// checks it is still there, so a rebuild in between is not carried over.
func (r *Live) Reverify(ctx context.Context, voucherID int64, was, inc string) (bool, error) {
	if r.cfg.Identity == nil || was == "" {
		return false, nil
	}
	if was == inc {
		return true, nil
	}
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil {
		return false, err
	}
	for _, bk := range r.allBuckets(voucherID, buckets) {
		n, err := reverifyScript.Run(ctx, r.rdb, []string{bk.Stock, bk.Window, bk.Orders, bk.Forgets()}, was, inc).Int()
		if err != nil {
			return false, fmt.Errorf("redisreserve: reverify voucher %d: %w", voucherID, err)
		}
		if n != 1 {
			// The buckets carried over so far record inc and the others
			// do not: the voucher is not verified (VerifiedIn), and its
			// rebuild restores what was lost (FenceLost).
			return false, nil
		}
	}
	return true, nil
}

// DrainedIn implements recovery.LiveSale.
func (r *Live) DrainedIn(ctx context.Context) (string, bool, error) {
	inc, err := r.rdb.Get(ctx, r.keys.Drained()).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("redisreserve: drained in: %w", err)
	}
	return inc, true, nil
}

// MarkDrained implements recovery.LiveSale. The key never expires: it is only
// believed while its incarnation is the current one.
func (r *Live) MarkDrained(ctx context.Context, incarnation string) error {
	if err := r.rdb.Set(ctx, r.keys.Drained(), incarnation, 0).Err(); err != nil {
		return fmt.Errorf("redisreserve: mark drained: %w", err)
	}
	return nil
}

// Fence implements recovery.LiveSale: every bucket of the voucher, with one
// token; none if another rebuild holds any.
func (r *Live) Fence(ctx context.Context, voucherID int64, ttl time.Duration) (string, bool, error) {
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil {
		return "", false, err
	}
	token := rand.Text()
	all := r.allBuckets(voucherID, buckets)
	for i, bk := range all {
		n, err := fenceScript.Run(ctx, r.rdb, []string{bk.Window, bk.Stock}, token, ttl.Milliseconds()).Int()
		if err == nil && n == 1 {
			continue
		}
		// Lift what this fence took: the other rebuild restores the voucher.
		for _, taken := range all[:i] {
			if uerr := unfenceScript.Run(ctx, r.rdb, []string{taken.Window}, token).Err(); uerr != nil {
				r.log().Warn("fence: could not lift a bucket's fence; it expires on its own", "voucher", voucherID, "bucket", taken.Bucket, "err", uerr)
			}
		}
		if err != nil {
			return "", false, fmt.Errorf("redisreserve: fence voucher %d: %w", voucherID, err)
		}
		return token, false, nil
	}
	return token, true, nil
}

// restoreChunk is how many buyers one restore_buyers.lua call stages: a
// short script (a few milliseconds) that shoppers of other vouchers wait
// behind, where 100,000 buyers in one call held Redis for the whole list.
const restoreChunk = 2000

// Restore implements recovery.LiveSale: for each bucket, its buyers (by
// core.BucketOf) are staged in chunks under the fence, then one script
// swaps them in with the bucket's share of the stock and the window, voids
// the transfers under way (the rebuild counted every unit afresh) and lifts
// the bucket's fence. Every call checks the fence token, so a rebuild that
// outlived its fence changes nothing.
func (r *Live) Restore(ctx context.Context, s recovery.RestoredSale, token string) error {
	v := s.Voucher
	n := v.BucketCount()
	r.learnBuckets(v.ID, n)
	if plan, ok := r.partial.Load(token); ok {
		return r.restoreLost(ctx, s, token, plan.(lostBuckets))
	}
	buyers := make([]map[int64]int64, n)
	for b := range buyers {
		buyers[b] = map[int64]int64{}
	}
	for user, order := range s.Buyers {
		buyers[core.BucketOf(user, n)][user] = order
	}
	shares := splitStock(v.Stock, n)
	units := v.Stock + int64(len(s.Buyers)) // each left or a buyer's
	// Bucket 0, whose window names the count, last.
	for b := n - 1; b >= 0; b-- {
		if err := r.restoreBucket(ctx, v, r.keys.Bucket(v.ID, b, n), n, shares[b], units, buyers[b], s.Incarnation, token); err != nil {
			return err
		}
	}
	return nil
}

// restoreBucket restores one bucket with its stock and buyers; units are
// the voucher's over all its buckets, recorded in every window.
func (r *sale) restoreBucket(ctx context.Context, v core.Voucher, bk BucketKeys, buckets int, stock, units int64,
	buyers map[int64]int64, incarnation, token string) error {
	staging := bk.Orders + ":restoring:" + token
	args := make([]any, 0, 1+2*min(len(buyers), restoreChunk))
	stage := func() error {
		if len(args) == 1 {
			return nil
		}
		n, err := restoreBuyersScript.Run(ctx, r.rdb, []string{bk.Window, staging}, args...).Int()
		if err != nil {
			return fmt.Errorf("redisreserve: restore voucher %d: stage buyers: %w", v.ID, err)
		}
		if n != 1 {
			return fmt.Errorf("redisreserve: restore voucher %d: the fence expired while the buyers were staged", v.ID)
		}
		args = args[:1]
		return nil
	}
	args = append(args, token)
	for user, order := range buyers {
		args = append(args, strconv.FormatInt(user, 10), strconv.FormatInt(order, 10))
		if len(args) == 1+2*restoreChunk {
			if err := stage(); err != nil {
				return err
			}
		}
	}
	if err := stage(); err != nil {
		return err
	}
	n, err := restoreScript.Run(ctx, r.rdb,
		[]string{bk.Stock, bk.Window, bk.Orders, staging, bk.Transfers(), bk.Forgets()},
		token, v.BeginAt.UnixMilli(), v.EndAt.UnixMilli(), stock, incarnation, len(buyers), token, buckets, units, int(v.Pause)).Int()
	if err != nil {
		return fmt.Errorf("redisreserve: restore voucher %d: %w", v.ID, err)
	}
	switch n {
	case 1:
		return nil
	case -1:
		return fmt.Errorf("redisreserve: restore voucher %d: fewer buyers staged than sent", v.ID)
	}
	return fmt.Errorf("redisreserve: restore voucher %d: the fence expired before the restore", v.ID)
}

// Unfence implements recovery.LiveSale: every bucket this token fenced (or
// froze: FenceLost).
func (r *Live) Unfence(ctx context.Context, voucherID int64, token string) error {
	r.partial.Delete(token)
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil {
		return err
	}
	var errs []error
	for _, bk := range r.allBuckets(voucherID, buckets) {
		errs = append(errs, unfenceScript.Run(ctx, r.rdb, []string{bk.Window}, token).Err())
	}
	return errors.Join(errs...)
}

// Fenced implements recovery.LiveSale: a rebuild's fence holds some bucket.
func (r *Live) Fenced(ctx context.Context, voucherID int64) (bool, error) {
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil {
		return false, err
	}
	all := r.allBuckets(voucherID, buckets)
	fence := make([]*redis.SliceCmd, len(all))
	var now *redis.TimeCmd
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, bk := range all {
			fence[i] = p.HMGet(ctx, bk.Window, "fence", "fenceUntil")
		}
		now = p.Time(ctx)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("redisreserve: fenced: %w", err)
	}
	for _, f := range fence {
		if fencedAt(f.Val(), now.Val()) {
			return true, nil
		}
	}
	return false, nil
}

// fencedAt reads a window's fence fields against Redis's clock.
func fencedAt(fields []any, now time.Time) bool {
	if len(fields) != 2 || fields[0] == nil {
		return false
	}
	until, _ := fields[1].(string)
	ms, err := strconv.ParseInt(until, 10, 64)
	return err == nil && ms > now.UnixMilli()
}

var _ recovery.LiveSale = (*Live)(nil)

// Features declares every optional part of a live store: Redis can tell
// a voucher's own masters from the rest (Reverify, Unaffected), rebuild
// only the buckets a master lost (FenceLost), and verify one shopper's
// bucket alone (VerifiedFor). On a single server they answer as a whole
// voucher would.
func (l *Live) Features() recovery.LiveFeatures {
	return recovery.LiveFeatures{Reverifier: l, Scoped: l, PartialFencer: l, ShopperVerifier: l}
}

// LiveState implements recovery.LiveSale, over the voucher's buckets: the
// stock is their sum with the units in transit between them, the buyers
// their union; present if every bucket is, fenced if any is, and verified
// in the incarnation they all record.
func (r *Live) LiveState(ctx context.Context, voucherID int64) (recovery.LiveState, error) {
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil {
		return recovery.LiveState{}, err
	}
	all := r.allBuckets(voucherID, buckets)
	var (
		stock  = make([]*redis.StringCmd, len(all))
		epoch  = make([]*redis.StringCmd, len(all))
		buyers = make([]*redis.MapStringStringCmd, len(all))
		fence  = make([]*redis.SliceCmd, len(all))
		now    *redis.TimeCmd
	)
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, bk := range all {
			stock[i] = p.Get(ctx, bk.Stock)
			epoch[i] = p.HGet(ctx, bk.Window, "epoch")
			buyers[i] = p.HGetAll(ctx, bk.Orders)
			fence[i] = p.HMGet(ctx, bk.Window, "fence", "fenceUntil")
		}
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return recovery.LiveState{}, fmt.Errorf("redisreserve: live state: %w", err)
	}
	s := recovery.LiveState{Buyers: map[int64]int64{}, Present: true, VerifiedIn: epoch[0].Val()}
	for i := range all {
		if n, err := stock[i].Int64(); err == nil {
			s.Stock += n
		} else {
			s.Present = false
		}
		if epoch[i].Val() != s.VerifiedIn {
			s.VerifiedIn = ""
		}
		s.Fenced = s.Fenced || fencedAt(fence[i].Val(), now.Val())
		for u, o := range buyers[i].Val() {
			user, err1 := strconv.ParseInt(u, 10, 64)
			order, err2 := strconv.ParseInt(o, 10, 64)
			if err1 == nil && err2 == nil {
				s.Buyers[user] = order
			}
		}
	}
	if !s.Present {
		s.Stock = 0
	} else if buckets > 1 {
		transfers, err := r.readTransfers(ctx, voucherID, buckets)
		if err != nil {
			return recovery.LiveState{}, err
		}
		s.Stock += transfers.inTransit()
	}
	return s, nil
}

var repairScript = redis.NewScript(lua.RepairOrder)

// Unaffected implements recovery.ScopedIncarnation. For each shard the
// orders' buckets are on, shard_identity.lua reads in one step that
// master's run_id, the shard's forgetting mark, and whether each of the
// buckets' states is still the one verified in readIn by this server under
// that mark. The shard vouches for its orders when either holds:
//
//   - its master's run_id is one of readIn's and its mark is readIn's
//     mark: a forgetting writes a new random mark on the shards it touches
//     before the sale's own, so a shard whose mark is still readIn's was
//     touched by none since, and its master has not restarted or failed
//     over;
//   - every bucket is unchanged: a rebuild, a carry-over to a later
//     incarnation or a forgetting on the shard would show in its state.
//     This covers a shard whose mark is behind readIn's (a forgetting of
//     other shards since), which the first cannot tell from one touched
//     after.
//
// Either way no rebuild of those buckets since readIn could have missed
// the orders, which is what the whole incarnation tells the repair. A
// master out of reach answers an error.
func (r *Live) Unaffected(ctx context.Context, readIn string, orders []core.Order) (bool, error) {
	if r.cfg.Identity == nil || readIn == "" || len(orders) == 0 {
		return false, nil
	}
	masters, mark := incarnationParts(readIn)
	type shardBuckets struct {
		forgets string
		windows []string
	}
	byShard := map[int]*shardBuckets{}
	var shards []int
	for _, o := range orders {
		bk, err := r.buyerBucket(ctx, o.VoucherID, o.UserID)
		if err != nil {
			return false, fmt.Errorf("redisreserve: unaffected: %w", err)
		}
		sb, ok := byShard[bk.Shard]
		if !ok {
			sb = &shardBuckets{forgets: bk.Forgets()}
			byShard[bk.Shard] = sb
			shards = append(shards, bk.Shard)
		}
		if !slices.Contains(sb.windows, bk.Window) {
			sb.windows = append(sb.windows, bk.Window)
		}
	}
	for _, shard := range shards {
		sb := byShard[shard]
		got, err := shardIdentityScript.Run(ctx, r.rdb, append([]string{sb.forgets}, sb.windows...), readIn).Slice()
		if err != nil {
			return false, fmt.Errorf("redisreserve: unaffected: shard %d: %w", shard, err)
		}
		if len(got) != 3 {
			return false, fmt.Errorf("redisreserve: unaffected: shard %d: %d values, want 3", shard, len(got))
		}
		node, _ := got[0].(string)
		shardMark, _ := got[1].(string)
		unchanged, _ := got[2].(int64)
		sameServers := node != "" && slices.Contains(masters, node) && shardMark == mark
		if !sameServers && unchanged != int64(len(sb.windows)) {
			return false, nil
		}
	}
	return true, nil
}

// RefreshIncarnation implements recovery.LiveSale.
func (r *Live) RefreshIncarnation(ctx context.Context) (string, error) {
	if r.cfg.Identity == nil {
		return "", nil
	}
	return r.cfg.Identity.Refresh(ctx)
}

// Repair implements recovery.LiveSale: repair_order.lua for each order, in one
// pipeline. EVAL, not EVALSHA: repairs follow a Redis that lost its
// script cache too, and they are rare.
func (r *Live) Repair(ctx context.Context, orders []core.Order) ([]core.Order, error) {
	bks := make([]BucketKeys, len(orders))
	for i, o := range orders {
		bk, err := r.buyerBucket(ctx, o.VoucherID, o.UserID)
		if err != nil {
			return nil, fmt.Errorf("redisreserve: repair: %w", err)
		}
		bks[i] = bk
	}
	cmds, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, o := range orders {
			repairScript.Eval(ctx, p, []string{bks[i].Stock, bks[i].Orders}, o.UserID, o.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisreserve: repair: %w", err)
	}
	var again []core.Order
	for i, c := range cmds {
		switch code, _ := c.(*redis.Cmd).Int(); code {
		case 2:
			again = append(again, orders[i])
		case 3:
			r.log().Error("repair: the buyer holds another order of the voucher in Redis", "order", orders[i].ID,
				"user", orders[i].UserID, "voucher", orders[i].VoucherID)
		case 4:
			r.log().Error("repair: no stock left to take for an order persisted across Redis's loss: its unit was sold again, and the database will refuse one order",
				"order", orders[i].ID, "voucher", orders[i].VoucherID)
		}
	}
	return again, nil
}

// Requeue hands orders to their voucher's queue again with the hand-off
// command the reservation runs (recovery.Config.Requeue): orders the
// buyers' hash names whose queue key vanished with its backlog. Each goes
// with the order body the reservation wrote, its time the one its id
// tells (IssuedAt), so its payment deadline is its own.
func (r *Live) Requeue(ctx context.Context, orders []core.Order) error {
	if r.cfg.Handoff.Command == nil {
		return errors.New("redisreserve: requeue: the queue is not fed by a hand-off")
	}
	for _, o := range orders {
		if o.CreatedAt.IsZero() {
			o.CreatedAt = IssuedAt(o.ID)
		}
		key := r.queueKey(o.VoucherID, r.keys.Bucket(o.VoucherID, 0, 1))
		body := string(r.cfg.OrderBody.Append(nil, o))
		args := make([]any, len(r.cfg.Handoff.Command))
		for i, a := range r.cfg.Handoff.Command {
			switch a {
			case core.HandoffKey:
				args[i] = key
			case core.HandoffBody:
				args[i] = body
			default:
				args[i] = a
			}
		}
		if err := r.rdb.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("redisreserve: requeue order %d: %w", o.ID, err)
		}
	}
	return nil
}
