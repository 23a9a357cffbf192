package redisreserve_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// TestAnEvictedBuyersHashSaysNothingOfAUnit: with the buyers hash gone
// (evicted: the stock and window stay), a missing mark no longer tells a
// unit that came back from one still held. A return and a re-drive's take
// back then change nothing and answer later (the caller has the voucher
// rebuilt from the database): a return that answered "nothing to return"
// stranded the unit (the database sold it again, Redis never did), a take
// back took a second unit for an order that held its own.
func TestAnEvictedBuyersHashSaysNothingOfAUnit(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		s := newBucketSale(t, r, 0)
		v := s.load(t, 91, 10, 1)
		bought := core.Order{ID: 9_100_001, UserID: 1, VoucherID: v.ID, CreatedAt: time.Now()}
		lettered := core.Order{ID: 9_100_002, UserID: 2, VoucherID: v.ID, CreatedAt: time.Now()}
		for _, o := range []core.Order{bought, lettered} {
			if res, err := s.res.Reserve(ctx, o); err != nil || res.Result != core.Reserved {
				t.Fatalf("reserve %d: %v %v", o.ID, res, err)
			}
		}
		bk := s.keys.Bucket(v.ID, 0, 1)
		if err := r.Client.Del(ctx, bk.Orders).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := s.res.Live().ReturnUnit(ctx, bought)
		if err != nil || got != core.ReturnLater {
			t.Fatalf("return with the buyers hash evicted: %v %v, want ReturnLater", got, err)
		}
		taken, err := s.res.Redrive().TakeBack(ctx, []core.Order{lettered})
		if err != nil || len(taken) != 1 || taken[0].Result != core.TakeBackLater {
			t.Fatalf("take back with the buyers hash evicted: %v %v, want TakeBackLater", taken, err)
		}
		if stock, _ := r.Client.Get(ctx, bk.Stock).Int64(); stock != 8 {
			t.Fatalf("stock %d after both, want 8: nothing changed", stock)
		}
		// Whole again (as a rebuild leaves it), the same calls act.
		if err := r.Client.HSet(ctx, bk.Orders, "1", bought.ID, "2", lettered.ID).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := s.res.Live().ReturnUnit(ctx, bought); err != nil || got != core.UnitReturned {
			t.Fatalf("return when whole: %v %v", got, err)
		}
		if taken, err := s.res.Redrive().TakeBack(ctx, []core.Order{lettered}); err != nil || taken[0].Result != core.UnitHeld {
			t.Fatalf("take back when whole: %v %v", taken, err)
		}
	})
}
