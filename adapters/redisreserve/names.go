package redisreserve

import (
	"sync"
	"sync/atomic"
)

// Every reservation names its bucket's keys and its queue, and the names
// depend on the voucher and bucket alone: a Reserver makes each once and
// keeps it. With that, the members' values sent by pointer (batch.go) and
// the body and limit key made on buffers of their own, laying out a batch
// member went from 1.75 µs and 22 allocations to 0.8 µs and 6
// (BenchmarkBatchMemberLayout, this 2-core machine).

// maxNames bounds each cache of names: past it a name is made per use, as
// before, so a stream of made-up ids costs time, not memory.
const maxNames = 1 << 16

// nameCache keeps names made once, up to maxNames of them.
type nameCache[K comparable] struct {
	m sync.Map // K -> V
	n atomic.Int64
}

// nameOf is the name kept under k, made by build (and kept) on first use.
func nameOf[K comparable, V any](c *nameCache[K], k K, build func() V) V {
	if v, ok := c.m.Load(k); ok {
		return v.(V)
	}
	v := build()
	if c.n.Load() < maxNames {
		if _, loaded := c.m.LoadOrStore(k, v); !loaded {
			c.n.Add(1)
		}
	}
	return v
}

// bucketID is one bucket of a voucher split into buckets.
type bucketID struct {
	voucher         int64
	bucket, buckets int
}

// bucket is Keys.Bucket, named once per bucket.
func (r *sale) bucket(voucherID int64, b, buckets int) BucketKeys {
	return nameOf(&r.bucketNames, bucketID{voucherID, b, buckets}, func() BucketKeys {
		return r.keys.Bucket(voucherID, b, buckets)
	})
}

// queueKey is seckill.lua's KEYS[4] for a reservation of the voucher in
// bucket bk: the hand-off's queue.
func (r *sale) queueKey(voucherID int64, bk BucketKeys) string {
	switch {
	case r.cfg.Handoff.Key == nil:
		// Untouched by the script, but every KEYS slot must name a key of
		// the bucket's slot.
		return bk.Orders
	case bk.Bucket == 0:
		return nameOf(&r.queueNames, voucherID, func() string { return r.cfg.Handoff.Key(voucherID) })
	default:
		// The queue of the bucket's shard: a queue's key depends on the
		// shard alone (core.Handoff.Key), asked here of a voucher id there.
		return nameOf(&r.shardQueueNames, bk.Shard, func() string { return r.cfg.Handoff.Key(r.voucherOnShard(bk.Shard)) })
	}
}

// payBy is Keys.PayBy, named once per shard.
func (r *sale) payBy(shard int) string {
	return nameOf(&r.payByNames, shard, func() string { return r.keys.PayBy(shard) })
}

// names are the names a reservation sends that depend on its bucket
// alone, made once.
type names struct {
	bucketNames     nameCache[bucketID]
	queueNames      nameCache[int64] // by voucher
	shardQueueNames nameCache[int]   // by shard
	payByNames      nameCache[int]   // by shard
}
