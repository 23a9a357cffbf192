package redisreserve

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// A hot voucher's buckets (core.Voucher.Buckets): each bucket is a whole
// voucher's live state (stock, window, buyers) on the shard
// core.Shards.OfBucket names, so the reservation script runs unchanged on
// the shopper's bucket (core.BucketOf). A bucket the script finds dry
// borrows from the others by a transfer, in three steps on two Redis
// masters, each atomic and each safe to run again:
//
//  1. bucket_pend.lua records the transfer pending at the borrower
//     (in:<id>), before any unit moves;
//  2. bucket_take.lua takes up to half the lender's stock, once per id
//     (out:<id> keeps what it granted, and a replay answers that);
//  3. bucket_give.lua adds the units at the borrower and removes the
//     pending record in one step, so they arrive once.
//
// A unit is always in one bucket's stock, a buyer's, or in transit (an
// out: record whose in: is still pending), never two of these, and a crash
// between the steps leaves a pending record that the transfers duty
// re-drives. out: records outlive transferMaxAge, after which a take
// refuses the id, so a late replay can never take twice.

var (
	pendScript = redis.NewScript(lua.BucketPend)
	takeScript = redis.NewScript(lua.BucketTake)
	giveScript = redis.NewScript(lua.BucketGive)
)

const (
	// transferMaxAge: a transfer takes no units once this old (by the
	// lender's clock against the borrower's record; Redis masters' clocks
	// are far closer than this).
	transferMaxAge = time.Minute
	// transferRecordKept: a granted transfer's record stays this long
	// after it was applied, past transferMaxAge, so no replay finds it gone.
	transferRecordKept = 2 * time.Minute
	// transferRedriveAfter: the duty leaves a pending transfer younger than
	// this to the shopper's request that started it.
	transferRedriveAfter = 5 * time.Second
	// idleBorrows bounds the borrows one reservation makes that brought
	// no unit (a rebuild voided them). A borrow that brought units is not
	// counted, nor is settling transfers in transit that carried some:
	// each takes half a lender's stock, other shoppers of the bucket may
	// sell what arrived before this one retries, and a reservation goes on
	// while units move (there are finitely many; its deadline bounds the
	// wait). A bound of 16 rounds of any kind answered 503 busy to the
	// unluckiest of 300 shoppers over 3 buckets racing for 90 units while
	// lenders still had some (seen once in CI, cluster, batches of 32), and
	// so did counting every settle that found any transfer pending, though
	// they carried units (CI again, batch 0).
	idleBorrows = 16
	// borrowWant is what a borrower asks for: the lender grants half its
	// stock, up to this.
	borrowWant = 1 << 30
	// borrowTimeout bounds one borrow (three script calls per lender),
	// whoever waits for it.
	borrowTimeout = 2 * time.Second
)

// MaxBuckets implements core.BucketBoard: a bucket per shard.
func (r *Reserver) MaxBuckets() int { return r.keys.shards().Count() }

// voucherOnShard is a voucher id of the shard (core.Shards.Of), for asking
// the hand-off's key of a bucket's shard.
func (r *sale) voucherOnShard(shard int) int64 {
	if shard == 0 {
		return int64(r.keys.shards().Count())
	}
	return int64(shard)
}

// learnBuckets remembers a voucher's bucket count (it never changes).
func (r *sale) learnBuckets(voucherID int64, buckets int) {
	r.bucketCounts.Store(voucherID, max(buckets, 1))
}

// KnowBuckets implements core.BucketBoard.
func (r *Reserver) KnowBuckets(voucherID int64, buckets int) { r.learnBuckets(voucherID, buckets) }

// bucketsOf is the voucher's bucket count: remembered, or read from its
// window (bucket 0's). A voucher with no window yet (unknown, or forgotten
// by Redis) counts as one bucket and is not remembered: its rebuild writes
// the count.
func (r *sale) bucketsOf(ctx context.Context, voucherID int64) (int, error) {
	if n, ok := r.bucketCounts.Load(voucherID); ok {
		return n.(int), nil
	}
	text, err := r.rdb.HGet(ctx, r.keys.Window(voucherID), "buckets").Result()
	switch {
	case errors.Is(err, redis.Nil):
		if exists, err := r.rdb.Exists(ctx, r.keys.Window(voucherID)).Result(); err == nil && exists == 1 {
			r.learnBuckets(voucherID, 1) // written before buckets: one
		}
		return 1, nil
	case err != nil:
		return 0, fmt.Errorf("redisreserve: buckets of voucher %d: %w", voucherID, err)
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("redisreserve: buckets of voucher %d: %q", voucherID, text)
	}
	r.learnBuckets(voucherID, n)
	return n, nil
}

// buyerBucket is the keys of the shopper's bucket of the voucher.
func (r *sale) buyerBucket(ctx context.Context, voucherID, userID int64) (BucketKeys, error) {
	n, err := r.bucketsOf(ctx, voucherID)
	if err != nil {
		return BucketKeys{}, err
	}
	return r.bucket(voucherID, core.BucketOf(userID, n), n), nil
}

// allBuckets is the keys of each of the voucher's buckets.
func (r *sale) allBuckets(voucherID int64, buckets int) []BucketKeys {
	out := make([]BucketKeys, max(buckets, 1))
	for b := range out {
		out[b] = r.keys.Bucket(voucherID, b, buckets)
	}
	return out
}

// reserveBorrowing follows a reservation its bucket answered sold out:
// the bucket borrows from the others and the reservation runs again, until
// it is answered otherwise or no other bucket has a unit to lend. Only
// then is the shopper told sold out.
func (r *sale) reserveBorrowing(ctx context.Context, o core.Order, bk BucketKeys, buckets int, res core.Reservation) (core.Reservation, error) {
	// The first try counted this request against the shopper's limit.
	o.LimitCounted = true
	for idle := 0; ; {
		got, err := r.borrow(ctx, o.VoucherID, bk.Bucket, buckets)
		if err != nil {
			return core.Reservation{}, err
		}
		switch {
		case got.units == 0 && got.voided:
			// A rebuild ran under the borrow and dealt the stock anew:
			// what the lenders said before it proves nothing. Ask again.
		case got.units == 0 && got.unloaded:
			// A bucket that could not be asked (forgotten by its master,
			// or fenced by a rebuild) may have units: not sold out, but a
			// voucher to verify (the caller rebuilds it).
			return core.Reservation{Result: core.VoucherMissing}, nil
		case got.units == 0:
			// Every other bucket was dry when asked. Units another bucket
			// is borrowing are in none of them: finish those transfers
			// (each step is safe to run twice) and ask again, so a
			// shopper is told sold out only with nothing in transit.
			moved, err := r.settleTransfers(ctx, o.VoucherID, buckets)
			if err != nil {
				return core.Reservation{}, err
			}
			if moved == 0 {
				// Every bucket is dry, and what was pending carried no
				// unit (a borrow of a dry lender, or given already).
				return res, nil
			}
			// Units moved: another round, unbounded as borrows that
			// brought units are (finitely many units).
			got.units = moved
		}
		if res, err = r.reserveIn(ctx, o, bk); err != nil || res.Result != core.SoldOut {
			return res, err
		}
		if got.units == 0 {
			// Nothing came in (a rebuild voided the borrow): asking again
			// is bounded, units moving are not.
			if idle++; idle >= idleBorrows {
				return core.Reservation{}, core.ErrBusy
			}
		}
	}
}

// borrowed is what a borrow brought: units, and when none came whether a
// bucket could not be asked (not loaded), or a rebuild voided the transfer
// (the buckets' generation changed under it).
type borrowed struct {
	units            int64
	unloaded, voided bool
}

// borrow moves units into bucket b from the first other bucket that has
// some. Concurrent borrows of one bucket in this process share one.
func (r *sale) borrow(ctx context.Context, voucherID int64, b, buckets int) (borrowed, error) {
	key := strconv.FormatInt(voucherID, 10) + "/" + strconv.Itoa(b)
	ch := r.borrowing.DoChan(key, func() (any, error) {
		// Not the first caller's deadline: the others share it.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), borrowTimeout)
		defer cancel()
		var out borrowed
		for i := 1; i < buckets; i++ {
			got, err := r.transfer(bctx, voucherID, (b+i)%buckets, b, buckets)
			if err != nil {
				return borrowed{}, err
			}
			if got.units > 0 || got.voided {
				return got, nil
			}
			out.unloaded = out.unloaded || got.unloaded
		}
		return out, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return borrowed{}, fmt.Errorf("redisreserve: borrow for voucher %d bucket %d: %w", voucherID, b, res.Err)
		}
		return res.Val.(borrowed), nil
	case <-ctx.Done():
		return borrowed{}, fmt.Errorf("redisreserve: borrow for voucher %d bucket %d: %w", voucherID, b, ctx.Err())
	}
}

// transfer moves units from bucket from to bucket to, and reports how
// many arrived.
func (r *sale) transfer(ctx context.Context, voucherID int64, from, to, buckets int) (borrowed, error) {
	lender, borrower := r.keys.Bucket(voucherID, from, buckets), r.keys.Bucket(voucherID, to, buckets)
	id := rand.Text()
	pend, err := pendScript.Run(ctx, r.rdb, []string{borrower.Stock, borrower.Window, borrower.Transfers()}, id, from, borrowWant).Slice()
	if err != nil {
		return borrowed{}, fmt.Errorf("pend: %w", err)
	}
	if len(pend) != 3 || pend[0] != int64(1) {
		return borrowed{unloaded: true}, nil // the borrower is fenced or gone
	}
	gen, _ := pend[1].(string)
	at, _ := pend[2].(int64)
	return r.completeTransfer(ctx, pendingTransfer{id: id, lender: lender, borrower: borrower, gen: gen, at: at})
}

// pendingTransfer is a transfer recorded pending at its borrower.
type pendingTransfer struct {
	id               string
	lender, borrower BucketKeys
	gen              string
	at               int64 // unix ms, the borrower's clock
}

// completeTransfer runs a pending transfer's take and give (each a no-op
// the second time) and reports how many units arrived.
func (r *sale) completeTransfer(ctx context.Context, t pendingTransfer) (borrowed, error) {
	granted, err := takeScript.Run(ctx, r.rdb, []string{t.lender.Stock, t.lender.Window, t.lender.Transfers()},
		t.id, t.borrower.Bucket, borrowWant, t.gen, t.at, transferMaxAge.Milliseconds()).Int64()
	if err != nil {
		return borrowed{}, fmt.Errorf("take: %w", err)
	}
	voided := false
	switch granted {
	case -1:
		// The lender is fenced, or its master forgot it: the record stays
		// for the duty (or a rebuild voids it).
		return borrowed{unloaded: true}, nil
	case -2, -3:
		// Void: nothing was or will be taken (too old, or a rebuild ran
		// since the transfer was recorded); the record goes.
		voided, granted = true, 0
	}
	n, err := giveScript.Run(ctx, r.rdb, []string{t.borrower.Stock, t.borrower.Window, t.borrower.Transfers()}, t.id, granted).Int()
	if err != nil {
		return borrowed{}, fmt.Errorf("give: %w", err)
	}
	switch {
	case n == -1:
		return borrowed{unloaded: true}, nil // fenced: the record stays
	case n == 0:
		// Given before (by another request settling it, or the duty),
		// or wiped by a rebuild, which wrote the buckets a new
		// generation: then what the lenders said before proves nothing.
		gen, err := r.rdb.HGet(ctx, t.borrower.Window, "gen").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return borrowed{}, fmt.Errorf("give: generation: %w", err)
		}
		if gen != t.gen {
			return borrowed{voided: true}, nil
		}
		return borrowed{units: granted}, nil // they arrived all the same
	}
	return borrowed{units: granted, voided: voided}, nil
}

// settleTransfers completes every transfer of the voucher left pending,
// whoever started it, and reports how many units those transfers carried
// (into any bucket). A transfer whose lender could not be asked (fenced,
// frozen) counts as carrying one: its units may yet come.
func (r *sale) settleTransfers(ctx context.Context, voucherID int64, buckets int) (int64, error) {
	s, err := r.readTransfers(ctx, voucherID, buckets)
	if err != nil {
		return 0, err
	}
	var moved int64
	for _, p := range s.pending {
		got, err := r.completeTransfer(ctx, p)
		if err != nil {
			return 0, fmt.Errorf("redisreserve: complete transfer %s of voucher %d: %w", p.id, voucherID, err)
		}
		moved += got.units
		if got.unloaded {
			moved++
		}
	}
	return moved, nil
}

// transferState is what the buckets' transfer records say: the pending
// transfers, and the granted ones with their units.
type transferState struct {
	pending []pendingTransfer
	// granted: transfer id -> units, and when and in which bucket it was
	// granted.
	granted map[string]grantedTransfer
}

type grantedTransfer struct {
	units  int64
	at     int64
	lender BucketKeys
}

// inTransit counts the units granted and not yet given.
func (s transferState) inTransit() int64 {
	var n int64
	for _, p := range s.pending {
		n += s.granted[p.id].units
	}
	return n
}

// readTransfers reads every bucket's transfer records.
func (r *sale) readTransfers(ctx context.Context, voucherID int64, buckets int) (transferState, error) {
	all := r.allBuckets(voucherID, buckets)
	cmds := make([]*redis.MapStringStringCmd, len(all))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, bk := range all {
			cmds[i] = p.HGetAll(ctx, bk.Transfers())
		}
		return nil
	})
	if err != nil {
		return transferState{}, fmt.Errorf("redisreserve: transfers of voucher %d: %w", voucherID, err)
	}
	return r.parseTransfers(all, cmds), nil
}

// parseTransfers reads each bucket's transfer records (HGETALL replies,
// in bucket order).
func (r *sale) parseTransfers(all []BucketKeys, cmds []*redis.MapStringStringCmd) transferState {
	buckets := len(all)
	s := transferState{granted: map[string]grantedTransfer{}}
	for i, c := range cmds {
		for field, value := range c.Val() {
			parts := strings.Split(value, ":")
			switch id, ok := strings.CutPrefix(field, "in:"); {
			case ok && len(parts) == 4:
				from, err1 := strconv.Atoi(parts[0])
				at, err2 := strconv.ParseInt(parts[3], 10, 64)
				if err1 != nil || err2 != nil || from < 0 || from >= buckets {
					r.log().Error("a transfer record that does not parse", "key", all[i].Transfers(), "field", field, "value", value)
					continue
				}
				s.pending = append(s.pending, pendingTransfer{id: id, lender: all[from], borrower: all[i], gen: parts[2], at: at})
			case strings.HasPrefix(field, "out:") && len(parts) == 3:
				units, err1 := strconv.ParseInt(parts[0], 10, 64)
				at, err2 := strconv.ParseInt(parts[2], 10, 64)
				if err1 != nil || err2 != nil {
					r.log().Error("a transfer record that does not parse", "key", all[i].Transfers(), "field", field, "value", value)
					continue
				}
				s.granted[strings.TrimPrefix(field, "out:")] = grantedTransfer{units: units, at: at, lender: all[i]}
			}
		}
	}
	return s
}

// RedriveTransfers completes the voucher's transfers left pending past
// transferRedriveAfter (their shopper's request died between the steps)
// and removes granted records old enough that no replay can need them.
// It reports how many it completed.
func (r *Reserver) RedriveTransfers(ctx context.Context, voucherID int64) (int, error) {
	buckets, err := r.bucketsOf(ctx, voucherID)
	if err != nil || buckets == 1 {
		return 0, err
	}
	s, err := r.readTransfers(ctx, voucherID, buckets)
	if err != nil {
		return 0, err
	}
	now, err := r.rdb.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redisreserve: time: %w", err)
	}
	done := 0
	pending := make(map[string]bool, len(s.pending))
	for _, p := range s.pending {
		pending[p.id] = true
		if now.UnixMilli()-p.at < transferRedriveAfter.Milliseconds() {
			continue
		}
		if _, err := r.completeTransfer(ctx, p); err != nil {
			return done, fmt.Errorf("redisreserve: re-drive transfer %s of voucher %d: %w", p.id, voucherID, err)
		}
		done++
	}
	for id, g := range s.granted {
		if !pending[id] && now.UnixMilli()-g.at > transferRecordKept.Milliseconds() {
			if err := r.rdb.HDel(ctx, g.lender.Transfers(), "out:"+id).Err(); err != nil {
				return done, fmt.Errorf("redisreserve: transfer record %s of voucher %d: %w", id, voucherID, err)
			}
		}
	}
	return done, nil
}

// transfersEvery is how often TransfersDuty looks for pending transfers.
const transfersEvery = 5 * time.Second

// TransfersDuty re-drives the transfers of every voucher in buckets this
// process has met (RedriveTransfers). Every instance runs it: each step is
// safe to run twice.
func (r *Reserver) TransfersDuty() core.Duty {
	return core.Duty{Name: "bucket transfers", Every: transfersEvery, Do: func(ctx context.Context) error {
		var errs []error
		r.bucketCounts.Range(func(k, v any) bool {
			if v.(int) > 1 {
				n, err := r.RedriveTransfers(ctx, k.(int64))
				if n > 0 {
					r.log().Warn("re-drove transfers between a voucher's buckets that a request left pending", "voucher", k, "transfers", n)
				}
				errs = append(errs, err)
			}
			return ctx.Err() == nil
		})
		return errors.Join(errs...)
	}}
}
