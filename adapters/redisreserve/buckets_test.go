package redisreserve_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
)

// bucketSale is a reservation over three shards (on the test cluster,
// three masters), each shard's orders LPUSHed to a list of its own.
type bucketSale struct {
	r      testenv.Redis
	res    *redisreserve.Reserver
	keys   redisreserve.Keys
	shards core.Shards
}

func newBucketSale(t *testing.T, r testenv.Redis, batch int) bucketSale {
	t.Helper()
	shards := redisreserve.SpreadShards(3)
	keys := redisreserve.Keys{Prefix: r.Prefix, Shards: shards}
	h := core.Handoff{Command: []string{"LPUSH", core.HandoffKey, core.HandoffBody},
		Key: func(v int64) string { return keys.ShardKey("orders", shards.Of(v)) }}
	res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: r.Prefix, Shards: shards, Handoff: h, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return bucketSale{r: r, res: res, keys: keys, shards: shards}
}

func (s bucketSale) load(t *testing.T, id, stock int64, buckets int) core.Voucher {
	t.Helper()
	v := core.Voucher{ID: id, Title: "hot", Stock: stock, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour), Buckets: buckets}
	if err := s.res.LoadVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return v
}

// queued counts the orders in every shard's list.
func (s bucketSale) queued(t *testing.T) int64 {
	t.Helper()
	var n int64
	for shard := range s.shards.Count() {
		l, err := s.r.Client.LLen(context.Background(), s.keys.ShardKey("orders", shard)).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += l
	}
	return n
}

// check holds each bucket whole (buyers + stock = total), each buyer in
// the bucket its id routes to, and the sale's sums: sold units = buyers =
// orders queued since queuedBefore, and sold + left = stock.
func (s bucketSale) check(t *testing.T, v core.Voucher, sold map[int64]int64, queuedBefore int64) {
	t.Helper()
	ctx := context.Background()
	n := v.BucketCount()
	var left, buyers int64
	for b := range n {
		bk := s.keys.Bucket(v.ID, b, n)
		stock, err := s.r.Client.Get(ctx, bk.Stock).Int64()
		if err != nil {
			t.Fatalf("bucket %d stock: %v", b, err)
		}
		total, _ := s.r.Client.HGet(ctx, bk.Window, "total").Int64()
		marks, err := s.r.Client.HGetAll(ctx, bk.Orders).Result()
		if err != nil {
			t.Fatal(err)
		}
		if stock < 0 || int64(len(marks))+stock != total {
			t.Errorf("bucket %d: %d buyers + %d left != total %d", b, len(marks), stock, total)
		}
		for u, o := range marks {
			user, _ := strconv.ParseInt(u, 10, 64)
			if core.BucketOf(user, n) != b {
				t.Errorf("buyer %d is marked in bucket %d, routes to %d", user, b, core.BucketOf(user, n))
			}
			if want := strconv.FormatInt(sold[user], 10); o != want {
				t.Errorf("buyer %d: marked order %s, was answered %s", user, o, want)
			}
		}
		left, buyers = left+stock, buyers+int64(len(marks))
	}
	queued := s.queued(t) - queuedBefore
	if buyers != int64(len(sold)) || queued != int64(len(sold)) || left+buyers != v.Stock {
		t.Errorf("answered %d reservations; %d buyers marked, %d orders queued, %d left of %d", len(sold), buyers, queued, left, v.Stock)
	}
}

// shoppersOf are n user ids that route to bucket b of buckets (b < 0:
// consecutive ids, whatever their buckets).
func shoppersOf(n, b, buckets int) []int64 {
	var out []int64
	for u := int64(1); len(out) < n; u++ {
		if b < 0 || core.BucketOf(u, buckets) == b {
			out = append(out, u)
		}
	}
	return out
}

// rush runs every shopper's reservation at once and returns who bought
// what; any answer other than reserved or sold out fails the test.
func (s bucketSale) rush(t *testing.T, voucherID int64, shoppers []int64) map[int64]int64 {
	t.Helper()
	var (
		mu   sync.Mutex
		sold = map[int64]int64{}
		wg   sync.WaitGroup
		gate = make(chan struct{})
	)
	for i, u := range shoppers {
		wg.Go(func() {
			<-gate
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			o := core.Order{ID: 1_000_000 + int64(i), UserID: u, VoucherID: voucherID, CreatedAt: time.Now()}
			r, err := s.res.Reserve(ctx, o)
			switch {
			case err != nil:
				t.Errorf("shopper %d: %v", u, err)
			case r.Result == core.Reserved:
				mu.Lock()
				sold[u] = r.OrderID
				mu.Unlock()
			case r.Result != core.SoldOut:
				t.Errorf("shopper %d: %v", u, r.Result)
			}
		})
	}
	close(gate)
	wg.Wait()
	return sold
}

// TestABucketedVoucherSellsEveryUnitOnce: 3 buckets, shoppers racing one
// call each (or batched), spread over the buckets or all routed to one:
// every unit is sold exactly once, nobody is told sold out while another
// bucket still had a unit (the sale ends with none left), and each bucket
// holds its own buyers.
func TestABucketedVoucherSellsEveryUnitOnce(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		for _, batch := range []int{0, 32} {
			s := newBucketSale(t, r, batch)
			for i, c := range []struct {
				name     string
				shoppers []int64
			}{
				{"spread", shoppersOf(300, -1, 3)},
				{"all in one bucket", shoppersOf(200, 1, 3)},
			} {
				t.Run(c.name+"/batch "+strconv.Itoa(batch), func(t *testing.T) {
					v := s.load(t, int64(10*batch+i+1), 90, 3)
					before := s.queued(t)
					sold := s.rush(t, v.ID, c.shoppers)
					if len(sold) != 90 {
						t.Errorf("%d of 90 units sold to %d shoppers", len(sold), len(c.shoppers))
					}
					s.check(t, v, sold, before)
					if n, err := s.res.RemainingStock(context.Background(), v.ID); err != nil || n != 0 {
						t.Errorf("remaining stock %d, %v; want 0", n, err)
					}
				})
			}
		}
	})
}

// TestABucketsBuyerIsOneBuyer: one order per user holds in a bucketed
// voucher, whichever bucket lent the unit; a release gives the unit back to
// the buyer's bucket, and the buyer may buy again.
func TestABucketsBuyerIsOneBuyer(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		s := newBucketSale(t, r, 0)
		ctx := context.Background()
		v := s.load(t, 7, 3, 3) // one unit per bucket
		u := shoppersOf(2, 2, 3)
		first := core.Order{ID: 100, UserID: u[0], VoucherID: v.ID, CreatedAt: time.Now()}
		if got, err := s.res.Reserve(ctx, first); err != nil || got.Result != core.Reserved {
			t.Fatalf("first: %+v, %v", got, err)
		}
		// Bucket 2 is dry: the second shopper of bucket 2 borrows.
		second := core.Order{ID: 101, UserID: u[1], VoucherID: v.ID, CreatedAt: time.Now()}
		if got, err := s.res.Reserve(ctx, second); err != nil || got.Result != core.Reserved {
			t.Fatalf("second (borrowing): %+v, %v", got, err)
		}
		again := core.Order{ID: 102, UserID: u[1], VoucherID: v.ID, CreatedAt: time.Now()}
		if got, err := s.res.Reserve(ctx, again); err != nil || got.Result != core.AlreadyPurchased || got.OrderID != 101 {
			t.Errorf("the second's repeat: %+v, %v; want already purchased, order 101", got, err)
		}
		if id, ok, err := s.res.ReservedOrder(ctx, u[1], v.ID); err != nil || !ok || id != 101 {
			t.Errorf("reserved order of the second: %d %v %v", id, ok, err)
		}
		if err := s.res.Release(ctx, second); err != nil {
			t.Fatal(err)
		}
		bk := s.keys.Bucket(v.ID, 2, 3)
		if n, _ := s.r.Client.Get(ctx, bk.Stock).Int64(); n != 1 {
			t.Errorf("bucket 2's stock after the release: %d, want 1 (the unit back in the buyer's bucket)", n)
		}
		if got, err := s.res.Reserve(ctx, again); err != nil || got.Result != core.Reserved {
			t.Errorf("after the release: %+v, %v", got, err)
		}
		if st, err := s.res.Live().LiveState(ctx, v.ID); err != nil || st.Stock != 1 || len(st.Buyers) != 2 || !st.Present {
			t.Errorf("live state: %+v, %v; want 1 left, 2 buyers", st, err)
		}
	})
}

// TestARebuildRestoresEveryBucket: a bucket whose keys are gone (its master
// lost them) fails the voucher's verification; the rebuild fences every
// bucket and writes each its own buyers and a share of the stock.
func TestARebuildRestoresEveryBucket(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		s := newBucketSale(t, r, 0)
		ctx := context.Background()
		v := s.load(t, 9, 30, 3)
		before := s.queued(t)
		sold := s.rush(t, v.ID, shoppersOf(12, -1, 3))
		if _, ok, err := s.res.Live().VerifiedIn(ctx, v.ID); err != nil || !ok {
			t.Fatalf("verified before the loss: %v %v", ok, err)
		}
		lost := s.keys.Bucket(v.ID, 1, 3)
		for _, k := range []string{lost.Stock, lost.Window, lost.Orders} {
			s.r.Client.Del(ctx, k)
		}
		if _, ok, _ := s.res.Live().VerifiedIn(ctx, v.ID); ok {
			t.Fatal("verified with a bucket gone")
		}
		token, ok, err := s.res.Live().Fence(ctx, v.ID, 10*time.Second)
		if err != nil || !ok {
			t.Fatalf("fence: %v %v", ok, err)
		}
		if _, ok, _ := s.res.Live().Fence(ctx, v.ID, 10*time.Second); ok {
			t.Fatal("a second rebuild fenced the voucher too")
		}
		if fenced, _ := s.res.Live().Fenced(ctx, v.ID); !fenced {
			t.Error("not fenced")
		}
		// While fenced, no bucket sells.
		if got, err := s.res.Reserve(ctx, core.Order{ID: 5000, UserID: 99_999, VoucherID: v.ID, CreatedAt: time.Now()}); err != nil || got.Result != core.VoucherMissing {
			t.Errorf("a reservation under the fence: %+v, %v", got, err)
		}
		restored := v
		restored.Stock = v.Stock - int64(len(sold))
		if err := s.res.Live().Restore(ctx, recovery.RestoredSale{Voucher: restored, Buyers: sold, Incarnation: ""}, token); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.res.Live().VerifiedIn(ctx, v.ID); err != nil || !ok {
			t.Errorf("verified after the rebuild: %v %v", ok, err)
		}
		s.check(t, v, sold, before)
		if n, err := s.res.RemainingStock(ctx, v.ID); err != nil || n != 18 {
			t.Errorf("remaining stock %d, %v; want 18", n, err)
		}
	})
}

// TestBucketsAreRefusedBeyondTheShards: a bucket per shard at most.
func TestBucketsAreRefusedBeyondTheShards(t *testing.T) {
	r := testenv.Miniredis(t)
	s := newBucketSale(t, r, 0)
	if s.res.MaxBuckets() != 3 {
		t.Fatalf("max buckets %d, want 3 (the shards)", s.res.MaxBuckets())
	}
	err := core.NewCatalog(core.CatalogConfig{Vouchers: nopRepo{}, Board: s.res}).Create(context.Background(),
		&core.Voucher{Title: "x", Stock: 1, BeginAt: time.Now(), EndAt: time.Now().Add(time.Hour), Buckets: 4})
	if core.CodeOf(err) != core.CodeBadRequest {
		t.Errorf("4 buckets on 3 shards: %v, want bad_request", err)
	}
}

type nopRepo struct{}

func (nopRepo) CreateVoucher(context.Context, *core.Voucher) error { return errors.New("not reached") }
func (nopRepo) DeleteVoucher(context.Context, int64) error         { return nil }
func (nopRepo) FindVoucher(context.Context, int64) (core.Voucher, error) {
	return core.Voucher{}, core.ErrVoucherNotFound
}

// TestABucketThatCannotBeAskedIsNoSellOut: a dry bucket whose only lender
// with units is gone (its master forgot it) answers "not loaded", for the
// caller to rebuild the voucher, never sold out.
func TestABucketThatCannotBeAskedIsNoSellOut(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		s := newBucketSale(t, r, 0)
		ctx := context.Background()
		v := s.load(t, 11, 3, 3) // one unit per bucket
		for i, b := range []int{0, 2} {
			u := shoppersOf(1, b, 3)[0]
			if got, err := s.res.Reserve(ctx, core.Order{ID: int64(200 + i), UserID: u, VoucherID: v.ID, CreatedAt: time.Now()}); err != nil || got.Result != core.Reserved {
				t.Fatalf("bucket %d's unit: %+v, %v", b, got, err)
			}
		}
		gone := s.keys.Bucket(v.ID, 1, 3)
		s.r.Client.Del(ctx, gone.Stock, gone.Window, gone.Orders)
		late := shoppersOf(2, 2, 3)[1]
		got, err := s.res.Reserve(ctx, core.Order{ID: 300, UserID: late, VoucherID: v.ID, CreatedAt: time.Now()})
		if err != nil || got.Result != core.VoucherMissing {
			t.Errorf("a dry bucket whose lender is gone: %+v, %v; want not loaded", got, err)
		}
	})
}
