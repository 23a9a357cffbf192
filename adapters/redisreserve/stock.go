package redisreserve

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// A stock read over several masters.
//
// A voucher's buckets on a cluster lie on several masters, and no read
// sees them all at one moment: a sum of parts each read at its own moment
// is no count the voucher ever had. A unit lent from one bucket to another
// is counted twice when the lender is read before the loan and the
// borrower after it, and a buyer's unit returned to one bucket while
// another is read counts a state that never was. A stock read
// (GET /api/vouchers/{id}) must still answer a count the voucher had at
// some moment while the request ran: a shopper who saw 0 and then 1, with
// no unit given back, was told wrong.
//
// So the count is of buyers, not of stock. Every window records the
// voucher's units over all its buckets (units: each left or a buyer's,
// fixed between rebuilds, whichever bucket holds it), and the stock is
// units minus the buyers of every bucket. A loan moves units, not buyers:
// it cannot tear the count. Buyers come with reservations, one at a time
// per bucket, and go with returns (release.lua, return_unit.lua), which
// count themselves in the window's returns. Read while no unit is
// returned, each bucket's buyers only grow, so the sum of the buyers read
// lies between the buyers at the read's start and at its end, and since
// buyers come one at a time, the voucher had exactly that many at some
// moment in between.
//
// Whether a unit was returned during the read is told by reading the
// buckets three times, each pass after the last one answered: when every
// bucket's returns and generation are the same in the first and third
// passes, none was returned (or rebuilt) while the second read, and its
// count stands. The mirror holds too: a bucket's buyers plus its returns
// are its reservations, which only grow; when none grew between the first
// and third passes, buyers only left while the second read, one at a time,
// and its count stands as well (units coming back after a sell-out that
// nobody buys). Otherwise the passes slide on, to stockPasses in all;
// a sale that keeps both selling and getting units back faster than that
// answers busy.
const stockPasses = 10

// errStockUnsettled: units kept coming back while the stock was read.
var errStockUnsettled = core.E(core.CodeBusy, "the stock kept changing while it was counted, retry shortly")

// errNoUnits: a window without units (written before they were kept).
var errNoUnits = errors.New("redisreserve: a bucket's window does not record the voucher's units")

var readBucketScript = redis.NewScript(lua.ReadBucket)

// bucketRead is one bucket as read_bucket.lua read it.
type bucketRead struct {
	stock, buyers, units, returns int64
	gen                           string
}

// stockAcrossMasters counts the stock of the buckets all as the comment
// above says.
func (r *sale) stockAcrossMasters(ctx context.Context, all []BucketKeys) (int64, error) {
	passes := make([][]bucketRead, 0, stockPasses)
	for len(passes) < stockPasses {
		pass, err := r.readBuckets(ctx, all)
		if err != nil {
			return 0, err
		}
		passes = append(passes, pass)
		if len(passes) < 3 {
			continue
		}
		n, err := countStock(passes[len(passes)-3], passes[len(passes)-2], pass)
		if !errors.Is(err, errStockUnsettled) {
			return n, err
		}
	}
	return 0, errStockUnsettled
}

// readBuckets runs read_bucket.lua on every bucket, in one pipeline (each
// master answers its own at its own moment).
func (r *sale) readBuckets(ctx context.Context, all []BucketKeys) ([]bucketRead, error) {
	cmds := make([]*redis.Cmd, len(all))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, bk := range all {
			cmds[i] = readBucketScript.EvalSha(ctx, p, []string{bk.Stock, bk.Window, bk.Orders})
		}
		return nil
	})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// A master that has not loaded the script (restarted, or new):
		// once by EVAL, which loads it.
		_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, bk := range all {
				cmds[i] = readBucketScript.Eval(ctx, p, []string{bk.Stock, bk.Window, bk.Orders})
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("redisreserve: stock: %w", err)
	}
	out := make([]bucketRead, len(all))
	for i, c := range cmds {
		v, err := c.Slice()
		if err != nil || len(v) != 5 {
			return nil, fmt.Errorf("redisreserve: stock: bucket %d: %v %w", i, v, err)
		}
		var ok [4]bool
		out[i].stock, ok[0] = v[0].(int64)
		out[i].buyers, ok[1] = v[1].(int64)
		out[i].units, ok[2] = v[2].(int64)
		out[i].returns, ok[3] = v[3].(int64)
		out[i].gen, _ = v[4].(string)
		if ok != [4]bool{true, true, true, true} {
			return nil, fmt.Errorf("redisreserve: stock: bucket %d: a reply that does not parse: %v", i, v)
		}
	}
	return out, nil
}

// countStock is the stock the middle of three passes over the buckets
// counted, if no rebuild ran between the first and the third, and either
// no unit came back or no unit was bought meanwhile (errStockUnsettled
// otherwise). ErrVoucherNotFound when a
// bucket is not loaded, errNoUnits when a window does not say the units.
func countStock(first, middle, last []bucketRead) (int64, error) {
	for b := range middle {
		if first[b].stock < 0 || middle[b].stock < 0 || last[b].stock < 0 {
			return 0, core.ErrVoucherNotFound
		}
	}
	noneBack, noneBought := true, true
	for b := range middle {
		if first[b].gen != middle[b].gen || middle[b].gen != last[b].gen {
			return 0, errStockUnsettled // a rebuild ran
		}
		if first[b].returns != last[b].returns {
			noneBack = false
		}
		if first[b].buyers+first[b].returns != last[b].buyers+last[b].returns {
			noneBought = false
		}
	}
	if !noneBack && !noneBought {
		return 0, errStockUnsettled
	}
	units := middle[0].units
	var buyers int64
	for _, m := range middle {
		if m.units < 0 || m.units != units {
			// Absent, or windows of one generation that disagree: the
			// count cannot rest on them.
			return 0, errNoUnits
		}
		buyers += m.buyers
	}
	if buyers > units {
		return 0, errNoUnits
	}
	return units - buyers, nil
}
