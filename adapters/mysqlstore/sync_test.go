package mysqlstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/core"
)

func TestSyncSaleBranches(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		sale := s.SyncSale()
		reserve := func(id, user, voucher int64) core.Reservation {
			t.Helper()
			r, err := sale.Reserve(ctx, order(id, user, voucher))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		soon := core.Voucher{Title: "soon", Stock: 5, BeginAt: time.Now().Add(time.Hour), EndAt: time.Now().Add(2 * time.Hour)}
		over := core.Voucher{Title: "over", Stock: 5, BeginAt: time.Now().Add(-2 * time.Hour), EndAt: time.Now().Add(-time.Hour)}
		for _, v := range []*core.Voucher{&soon, &over} {
			if err := s.CreateVoucher(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		one := newVoucher(t, s, 1)
		for _, c := range []struct {
			name              string
			id, user, voucher int64
			want              core.ReservationResult
		}{
			{"unknown voucher", 1, 1, 424242, core.VoucherMissing},
			{"not started", 2, 1, soon.ID, core.NotStarted},
			{"ended", 3, 1, over.ID, core.Ended},
			{"reserved", 4, 1, one.ID, core.Reserved},
			{"replay of the same order", 4, 1, one.ID, core.Reserved},
			{"sold out", 5, 2, one.ID, core.SoldOut},
		} {
			if got := reserve(c.id, c.user, c.voucher); got.Result != c.want {
				t.Errorf("%s: %v, want %v", c.name, got.Result, c.want)
			}
		}
		if n := dbStock(t, s, one.ID); n != 0 {
			t.Fatalf("stock %d after one sale and a replay, want 0", n)
		}
		two := newVoucher(t, s, 5)
		reserve(10, 1, two.ID)
		if got := reserve(11, 1, two.ID); got.Result != core.AlreadyPurchased || got.OrderID != 10 {
			t.Fatalf("second order of the user: %+v, want AlreadyPurchased holding 10", got)
		}
		if err := sale.Release(ctx, order(10, 1, two.ID)); err != nil {
			t.Fatal(err)
		}
		if err := sale.Release(ctx, order(10, 1, two.ID)); err != nil {
			t.Fatal(err)
		}
		if n := dbStock(t, s, two.ID); n != 5 {
			t.Fatalf("stock %d after two releases, want 5", n)
		}
	})
}

func TestSyncSaleUnderContention(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		const stock, buyers = 50, 200
		v := newVoucher(t, s, stock)
		sale := s.SyncSale()
		var mu sync.Mutex
		results := map[core.ReservationResult]int{}
		var wg sync.WaitGroup
		for i := range buyers {
			wg.Go(func() {
				// Every fifth buyer tries twice with two order ids.
				user := int64(i + 1)
				for try := range 1 + btoi(i%5 == 0) {
					r, err := sale.Reserve(context.Background(), order(int64(i*10+try+1), user, v.ID))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					results[r.Result]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if results[core.Reserved] != stock || orderCount(t, s, v.ID) != stock || dbStock(t, s, v.ID) != 0 {
			t.Fatalf("results %v, %d rows, stock %d: want %d reserved and rows, stock 0",
				results, orderCount(t, s, v.ID), dbStock(t, s, v.ID), stock)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
