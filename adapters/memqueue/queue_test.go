package memqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/memqueue"
	"github.com/seckill-lab/seckill/adapters/redisreserve/saletest"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

func TestConformance(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		conformance(t, r)
	})
}

func conformance(t *testing.T, r testenv.Redis) {
	queuetest.Run(t, queuetest.Backend{
		Open: func(*testing.T, string) core.Queue {
			return memqueue.New(memqueue.Config{Capacity: 100, Block: 50 * time.Millisecond}, nil)
		},
		// The reservation in Redis, then Publish; released when full.
		Sell: saletest.Sell(r),
		// The process dies: the channel and all it holds are gone.
		Crash:    func(_ *testing.T, q core.Queue) { q.Close() },
		Capacity: 100,
	})
}

// TestDrainOnStop: a clean stop persists what the channel still holds.
func TestPipelineDrainsTheQueueOnStop(t *testing.T) {
	q := memqueue.New(memqueue.Config{Capacity: 1000, Block: 20 * time.Millisecond}, nil)
	store := &countingStore{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stop requested before the consumers even started
	for i := range 500 {
		if err := q.Publish(context.Background(), queuetest.Body(int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	core.NewPipeline(q, store, core.PipelineConfig{Consumers: 2, BatchSize: 64}, nil, nil).Run(ctx)
	if store.n != 500 || q.Depth() != 0 {
		t.Fatalf("persisted %d, %d left in the queue: want all 500 drained on stop", store.n, q.Depth())
	}
}

type countingStore struct {
	mu sync.Mutex
	n  int
}

func (s *countingStore) SaveOrders(_ context.Context, orders []core.Order) (core.SaveResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n += len(orders)
	return core.SaveResult{Created: len(orders)}, nil
}
