package core

import "context"

// Buckets: a hot voucher's live stock split over several shards
// (Voucher.Buckets), so that on a Redis Cluster its reservations run on
// several masters. A shopper always goes to the same bucket, chosen by
// user id, so one order per user stays a check within one bucket; a bucket
// that runs dry borrows units from the others (the live store's business:
// see redisreserve's transfers), and the voucher is sold out only when
// every bucket is.

// BucketOf is the bucket of buckets a shopper's requests go to: a mix of
// the user id (consecutive ids spread evenly, and no pattern in ids lines
// up with one bucket), modulo the count.
func BucketOf(userID int64, buckets int) int {
	if buckets <= 1 {
		return 0
	}
	x := uint64(userID)
	// splitmix64's finalizer: every bit of the id moves every bit of x.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(buckets))
}

// OfBucket is the shard of a voucher's bucket: bucket 0 is on the
// voucher's own shard (an unbucketed voucher is its own bucket 0), and
// the others follow at even steps around the shards, so with as many
// buckets as masters (and shards a multiple of the masters, spread as
// redisreserve.SpreadShards does) each bucket is on its own master.
func (s Shards) OfBucket(voucherID int64, bucket, buckets int) int {
	n := len(s.tags)
	if buckets <= 1 || n <= 1 {
		return s.Of(voucherID)
	}
	return (s.Of(voucherID) + bucket*n/buckets) % n
}

// BucketBoard is a StockBoard (and LiveSale) that can split a voucher
// into buckets: MaxBuckets is the most it allows (a bucket per shard). A
// board without it keeps every voucher whole, and Catalog.Create refuses
// buckets.
type BucketBoard interface {
	MaxBuckets() int
	// KnowBuckets tells the board a voucher's bucket count, as the
	// database has it: a rebuild does before it fences the voucher, whose
	// live state (which records the count too) may be gone.
	KnowBuckets(voucherID int64, buckets int)
}

// BucketOrderHolder is an OrderHolder over several shards that lists a
// bucketed voucher's held orders from every shard its buckets are on
// (ShardQueues' join does; a queue of one shard holds them all anyway).
type BucketOrderHolder interface {
	HeldBucketOrders(ctx context.Context, voucherID int64, buckets int) ([]Order, error)
}

// HeldBucketsFunc is a held-orders lister by bucket count, as both
// OrderHolder (one bucket) and BucketOrderHolder.
type HeldBucketsFunc func(ctx context.Context, voucherID int64, buckets int) ([]Order, error)

// HeldOrders calls f for one bucket.
func (f HeldBucketsFunc) HeldOrders(ctx context.Context, voucherID int64) ([]Order, error) {
	return f(ctx, voucherID, 1)
}

// HeldBucketOrders calls f.
func (f HeldBucketsFunc) HeldBucketOrders(ctx context.Context, voucherID int64, buckets int) ([]Order, error) {
	return f(ctx, voucherID, buckets)
}
