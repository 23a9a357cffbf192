package mysqlstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/core"
)

// TestSyncSaleUnderContention: beyond the rule book (TestRules), the rows:
// what the sale answered as reserved is exactly what the table holds.
func TestSyncSaleUnderContention(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		const stock, buyers = 50, 200
		v := newVoucher(t, s, stock)
		sale := s.SyncSale(15 * time.Minute)
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
