package core_test

import (
	"context"
	"slices"
	"testing"

	"github.com/seckill-lab/seckill/core"
)

// TestShoppersSpreadEvenlyOverBuckets: consecutive user ids, and ids that
// share a stride, fall into the buckets within a few percent of even, and
// a shopper always into the same one.
func TestShoppersSpreadEvenlyOverBuckets(t *testing.T) {
	for _, buckets := range []int{2, 3, 4} {
		for _, stride := range []int64{1, 3, 12} {
			counts := make([]int, buckets)
			const n = 30_000
			for i := int64(1); i <= n; i++ {
				b := core.BucketOf(i*stride, buckets)
				if b != core.BucketOf(i*stride, buckets) || b < 0 || b >= buckets {
					t.Fatalf("user %d: bucket %d", i*stride, b)
				}
				counts[b]++
			}
			for b, c := range counts {
				if even := n / buckets; c < even*97/100 || c > even*103/100 {
					t.Errorf("%d buckets, ids in strides of %d: bucket %d has %d of %d (%v)", buckets, stride, b, c, n, counts)
				}
			}
		}
	}
	if core.BucketOf(12345, 1) != 0 || core.BucketOf(12345, 0) != 0 {
		t.Error("one bucket (or none set) is bucket 0")
	}
}

// TestABucketedVouchersHeldOrdersComeFromEachBucketsShard: the join asks
// the shard of every bucket, the voucher's own shard alone for a voucher
// in one bucket.
func TestABucketedVouchersHeldOrdersComeFromEachBucketsShard(t *testing.T) {
	shards, fakes, q := threeShards(t)
	fakes[1].held[4] = []core.Order{{ID: 9, VoucherID: 4}}
	fakes[2].held[4] = []core.Order{{ID: 10, VoucherID: 4}}
	fakes[0].held[4] = []core.Order{{ID: 11, VoucherID: 4}}
	caps := core.CapabilitiesOf(q)
	ids := func(v core.Voucher) []int64 {
		t.Helper()
		held, err := caps.HeldOrdersOf(context.Background(), v)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, o := range held {
			out = append(out, o.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := ids(core.Voucher{ID: 4}); !slices.Equal(got, []int64{9}) {
		t.Errorf("voucher 4 whole: held %v, want [9] (its shard's)", got)
	}
	if got := ids(core.Voucher{ID: 4, Buckets: 3}); !slices.Equal(got, []int64{9, 10, 11}) {
		t.Errorf("voucher 4 in 3 buckets: held %v, want [9 10 11] (every bucket's shard)", got)
	}
	if got := ids(core.Voucher{ID: 4, Buckets: 2}); len(got) != 2 || shards.OfBucket(4, 1, 2) == shards.Of(4) {
		t.Errorf("voucher 4 in 2 buckets: held %v from shards %d and %d", got, shards.Of(4), shards.OfBucket(4, 1, 2))
	}
}
