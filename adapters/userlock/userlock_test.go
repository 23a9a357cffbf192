package userlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/userlock"
	"github.com/seckill-lab/seckill/core"
)

// probeStore records how many batches hold a given user at the same time.
type probeStore struct {
	mu      sync.Mutex
	inside  map[int64]int
	overlap atomic.Int64
	saved   atomic.Int64
}

func (p *probeStore) SaveOrders(_ context.Context, orders []core.Order) (core.SaveResult, error) {
	p.mu.Lock()
	for _, o := range orders {
		p.inside[o.UserID]++
		if p.inside[o.UserID] > 1 {
			p.overlap.Add(1)
		}
	}
	p.mu.Unlock()
	time.Sleep(2 * time.Millisecond) // widen the window a missing lock would show
	p.mu.Lock()
	for _, o := range orders {
		p.inside[o.UserID]--
	}
	p.mu.Unlock()
	p.saved.Add(int64(len(orders)))
	return core.SaveResult{Created: len(orders)}, nil
}

func TestBatchesSharingAUserNeverRunTogether(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		probe := &probeStore{inside: map[int64]int{}}
		s := userlock.New(probe, r.Client, r.Prefix)
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				for i := range 10 {
					// Users overlap between workers, in different orders.
					batch := []core.Order{{ID: 1, UserID: int64(1 + (w+i)%3)}, {ID: 2, UserID: int64(1 + (w+i+1)%3)}}
					if _, err := s.SaveOrders(context.Background(), batch); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if n := probe.overlap.Load(); n != 0 {
			t.Fatalf("%d times two batches held the same user at once", n)
		}
		if n := probe.saved.Load(); n != 120 {
			t.Fatalf("saved %d orders, want 120", n)
		}
	})
}
