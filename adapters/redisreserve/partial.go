package redisreserve

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
	"github.com/seckill-lab/seckill/lua"
)

// Rebuilding some of a voucher's buckets: a master's restart (or failover)
// loses the buckets it held, and the others are as they were. FenceLost
// fences the lost buckets and freezes the intact ones (shoppers go on
// buying from them; no unit moves between buckets), and Restore then
// writes only the lost buckets, from a count the intact ones' frozen
// totals make exact:
//
//	lost units = the voucher's units (stock column + live orders)
//	           - the intact buckets' totals
//	           - the units in transit between intact buckets
//
// Whatever a lost bucket lent or borrowed and had not yet given is in that
// count; the intact buckets' pending transfers from a lost lender are
// voided as they thaw, under the buckets' new generation.

var (
	freezeScript       = redis.NewScript(lua.FreezeBucket)
	thawScript         = redis.NewScript(lua.ThawBucket)
	verifyBucketScript = redis.NewScript(lua.VerifyBucket)
)

// VerifiedFor implements recovery.ShopperVerifier: the shopper's bucket of a
// voucher in buckets, judged by its own master (verify_bucket.lua). An
// intact bucket is remembered for the incarnation, as recovery.Guard
// remembers a verified voucher, so its shoppers cost no more round trips
// while the voucher's other buckets are rebuilt; a reservation that finds
// the bucket not loaded forgets it (Reserve).
func (r *Live) VerifiedFor(ctx context.Context, voucherID, userID int64, inc string) (bool, error) {
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil || buckets <= 1 || r.cfg.Identity == nil {
		return false, err
	}
	bk := r.bucket(voucherID, core.BucketOf(userID, buckets), buckets)
	if was, ok := r.intactBuckets.Load(bk.Window); ok && was.(string) == inc {
		return true, nil
	}
	n, err := verifyBucketScript.Run(ctx, r.rdb, []string{bk.Stock, bk.Window, bk.Orders, bk.Forgets()}).Int()
	if err != nil {
		return false, fmt.Errorf("redisreserve: verify voucher %d bucket %d: %w", voucherID, bk.Bucket, err)
	}
	if n != 1 {
		return false, nil
	}
	r.intactBuckets.Store(bk.Window, inc)
	return true, nil
}

// lostBuckets is what FenceLost fenced (lost) of a voucher's buckets; it
// froze the others.
type lostBuckets struct {
	buckets int
	lost    []int
}

// FenceLost implements recovery.PartialFencer. Bucket by bucket, in order (so
// that two rebuilds meet at the first bucket, as Fence's do), a bucket
// that is intact — its master is the server that wrote it and recorded no
// forgetting since (freeze_bucket.lua) — is frozen, any other fenced. A
// voucher with no intact bucket, or no lost one, is fenced whole, as Fence
// does.
func (r *Live) FenceLost(ctx context.Context, voucherID int64, ttl time.Duration) (string, bool, error) {
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil {
		return "", false, err
	}
	if buckets <= 1 || r.cfg.Identity == nil {
		return r.Fence(ctx, voucherID, ttl)
	}
	all := r.allBuckets(voucherID, buckets)
	token := rand.Text()
	taken := 0
	giveBack := func() {
		for _, bk := range all[:taken] {
			if uerr := unfenceScript.Run(ctx, r.rdb, []string{bk.Window}, token).Err(); uerr != nil {
				r.log().Warn("fence: could not lift a bucket's fence; it expires on its own", "voucher", voucherID, "bucket", bk.Bucket, "err", uerr)
			}
		}
	}
	var lost []int
	for i, bk := range all {
		state, err := freezeScript.Run(ctx, r.rdb, []string{bk.Window, bk.Stock, bk.Orders, bk.Forgets()}, token, ttl.Milliseconds()).Int()
		if err != nil {
			giveBack()
			return "", false, fmt.Errorf("redisreserve: freeze voucher %d bucket %d: %w", voucherID, i, err)
		}
		if state == 0 {
			n, err := fenceScript.Run(ctx, r.rdb, []string{bk.Window, bk.Stock}, token, ttl.Milliseconds()).Int()
			if err != nil {
				giveBack()
				return "", false, fmt.Errorf("redisreserve: fence voucher %d: %w", voucherID, err)
			}
			if n != 1 {
				state = -1
			}
			lost = append(lost, i)
		}
		if state == -1 {
			giveBack()
			return token, false, nil
		}
		taken = i + 1
	}
	if len(lost) == len(all) {
		return token, true, nil
	}
	if len(lost) == 0 {
		// Every bucket intact: whatever called for a rebuild, it is whole.
		for i, bk := range all {
			n, err := fenceScript.Run(ctx, r.rdb, []string{bk.Window, bk.Stock}, token, ttl.Milliseconds()).Int()
			if err != nil || n != 1 {
				giveBack()
				if err != nil {
					return "", false, fmt.Errorf("redisreserve: fence voucher %d bucket %d: %w", voucherID, i, err)
				}
				return token, false, nil
			}
		}
		return token, true, nil
	}
	r.partial.Store(token, lostBuckets{buckets: buckets, lost: lost})
	return token, true, nil
}

// restoreLost is Restore after FenceLost fenced only the lost buckets: it
// counts their units against the intact buckets' frozen totals, restores
// each lost bucket with its own buyers and an even share of those units
// left, and thaws the intact buckets.
func (r *sale) restoreLost(ctx context.Context, s recovery.RestoredSale, token string, plan lostBuckets) error {
	v := s.Voucher
	n := plan.buckets
	all := r.allBuckets(v.ID, n)
	isLost := make([]bool, n)
	for _, b := range plan.lost {
		isLost[b] = true
	}
	intact, transit, err := r.frozenTotals(ctx, v.ID, token, all, isLost)
	if err != nil {
		return err
	}
	buyers := make(map[int]map[int64]int64, len(plan.lost))
	lostBuyers := 0
	for _, b := range plan.lost {
		buyers[b] = map[int64]int64{}
	}
	for user, order := range s.Buyers {
		if m, ok := buyers[core.BucketOf(user, n)]; ok {
			m[user] = order
			lostBuyers++
		}
	}
	units := v.Stock + int64(len(s.Buyers))
	left := units - intact - transit - int64(lostBuyers)
	if left < 0 {
		r.log().Error("restore: the intact buckets hold more units than the voucher has beside the lost buckets' buyers; the lost buckets get no stock",
			"voucher", v.ID, "units", units, "intact_totals", intact, "in_transit", transit, "lost_buyers", lostBuyers)
		left = 0
	}
	shares := splitStock(left, len(plan.lost))
	// What the buckets hold once restored: units, unless the clamp above
	// gave the lost buckets none (then it is what the intact ones hold).
	held := intact + transit + int64(lostBuyers) + left
	// Bucket 0, whose window names the count, last (plan.lost ascends).
	for j := len(plan.lost) - 1; j >= 0; j-- {
		b := plan.lost[j]
		if err := r.restoreBucket(ctx, v, all[b], n, shares[j], held, buyers[b], s.Incarnation, token); err != nil {
			return err
		}
	}
	voided, err := r.thaw(ctx, v.ID, all, isLost, plan.lost, token, s.Incarnation, held)
	if err != nil {
		return err
	}
	r.partial.Delete(token)
	r.log().Warn("restored a voucher's lost buckets; the others kept their state",
		"voucher", v.ID, "lost", plan.lost, "buckets", n, "units", units, "intact_totals", intact,
		"in_transit", transit, "lost_buyers", lostBuyers, "lost_stock", left, "transfers_voided", voided)
	return nil
}

// frozenTotals reads what the intact buckets hold while this rebuild
// freezes them: their totals, and the units in transit between them —
// granted by an intact lender, pending at an intact borrower (the lost
// buckets' records are void, so no transfer touching one is counted).
func (r *sale) frozenTotals(ctx context.Context, voucherID int64, token string, all []BucketKeys, isLost []bool) (intact, transit int64, err error) {
	windows := make([]*redis.SliceCmd, len(all))
	records := make([]*redis.MapStringStringCmd, len(all))
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, bk := range all {
			if !isLost[b] {
				windows[b] = p.HMGet(ctx, bk.Window, "total", "freeze")
			}
			records[b] = p.HGetAll(ctx, bk.Transfers())
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("redisreserve: restore voucher %d: the intact buckets: %w", voucherID, err)
	}
	for b := range all {
		if isLost[b] {
			// Its records are void: whatever it had in transit is counted
			// as the lost buckets' own.
			records[b] = redis.NewMapStringStringResult(nil, nil)
			continue
		}
		w := windows[b].Val()
		total, err := strconv.ParseInt(fmt.Sprint(w[0]), 10, 64)
		if err != nil || w[1] != token {
			return 0, 0, fmt.Errorf("redisreserve: restore voucher %d: bucket %d is no longer frozen by this rebuild (total %v, freeze %v)", voucherID, b, w[0], w[1])
		}
		intact += total
	}
	return intact, r.parseTransfers(all, records).inTransit(), nil
}

// thaw lifts this rebuild's freeze from the intact buckets, voiding their
// transfers with the lost ones; it returns how many it voided.
func (r *sale) thaw(ctx context.Context, voucherID int64, all []BucketKeys, isLost []bool, lost []int, token, incarnation string, held int64) (int, error) {
	args := []any{token, token, incarnation, held}
	for _, b := range lost {
		args = append(args, b)
	}
	voided := 0
	for b, bk := range all {
		if isLost[b] {
			continue
		}
		got, err := thawScript.Run(ctx, r.rdb, []string{bk.Window, bk.Transfers()}, args...).Int()
		if err != nil {
			return voided, fmt.Errorf("redisreserve: restore voucher %d: thaw bucket %d: %w", voucherID, b, err)
		}
		if got < 0 {
			return voided, fmt.Errorf("redisreserve: restore voucher %d: bucket %d's freeze lapsed before the thaw", voucherID, b)
		}
		voided += got
	}
	return voided, nil
}
