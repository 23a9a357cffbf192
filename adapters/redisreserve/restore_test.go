package redisreserve_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
)

// scriptSizes records the argument count of every script call a client
// makes.
type scriptSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (h *scriptSizes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
			h.mu.Lock()
			h.sizes = append(h.sizes, len(cmd.Args()))
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (h *scriptSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAHundredThousandBuyersAreRestoredInChunksWithinTheFence: a voucher
// of 100,000 buyers is restored under a 10 s fence, no script call
// carrying more than one chunk, and shoppers meet the old state or the
// whole new one.
func TestAHundredThousandBuyersAreRestoredInChunksWithinTheFence(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		const buyers = 100_000
		s := newSale(t, r, "stream")
		s.load(t, 1, buyers+10, past(), future())
		ctx := context.Background()
		fence := 10 * time.Second // the server's
		if r.Mini != nil {
			fence = time.Minute // miniredis's Lua under the race detector is no Redis
		}
		token, ok, err := s.res.Live().Fence(ctx, 1, fence)
		if err != nil || !ok {
			t.Fatalf("fence: %v %v", ok, err)
		}
		sale := recovery.RestoredSale{
			Voucher: core.Voucher{ID: 1, Stock: 10, BeginAt: past(), EndAt: future()},
			Buyers:  make(map[int64]int64, buyers),
		}
		for u := int64(1); u <= buyers; u++ {
			sale.Buyers[u] = 1_000_000 + u
		}
		sizes := &scriptSizes{}
		r.Client.AddHook(sizes)
		if err := s.res.Live().Restore(ctx, sale, token); err != nil {
			t.Fatalf("restore of %d buyers within its fence: %v", buyers, err)
		}
		sizes.mu.Lock()
		calls, largest := len(sizes.sizes), 0
		for _, n := range sizes.sizes {
			largest = max(largest, n)
		}
		sizes.mu.Unlock()
		if calls < buyers/5000 || largest > 5000 {
			t.Fatalf("%d script calls, the largest with %d arguments: want the buyers in chunks (not one call of %d)", calls, largest, 2*buyers)
		}
		if fenced, _ := s.res.Live().Fenced(ctx, 1); fenced {
			t.Fatal("the fence is still up after the restore")
		}
		if n := r.Client.HLen(ctx, s.keys.Orders(1)).Val(); n != buyers {
			t.Fatalf("%d buyers in Redis after the restore, want %d", n, buyers)
		}
		if ttl := r.Client.PTTL(ctx, s.keys.Orders(1)).Val(); ttl >= 0 {
			t.Fatalf("the restored buyers expire (%v): the staging hash's time to live was kept", ttl)
		}
		if got := s.reserve(t, 5, buyers+1, 1); got.Result != core.Reserved {
			t.Fatalf("a new buyer after the restore: %v, want reserved", got.Result)
		}
		if got := s.reserve(t, 6, 77_000, 1); got.Result != core.AlreadyPurchased {
			t.Fatalf("a restored buyer again: %v, want already purchased", got.Result)
		}
	})
}

// TestARebuildThatLostItsFenceStagesNothing: a rebuild whose fence another
// took (or that lapsed) writes no buyers and restores nothing.
func TestARebuildThatLostItsFenceStagesNothing(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		s := newSale(t, r, "stream")
		s.load(t, 1, 5, past(), future())
		ctx := context.Background()
		stale, ok, _ := s.res.Live().Fence(ctx, 1, 10*time.Second)
		if !ok {
			t.Fatal("no fence")
		}
		if err := s.res.Live().Unfence(ctx, 1, stale); err != nil {
			t.Fatal(err)
		}
		current, ok, _ := s.res.Live().Fence(ctx, 1, 10*time.Second)
		if !ok {
			t.Fatal("no second fence")
		}
		sale := recovery.RestoredSale{Voucher: core.Voucher{ID: 1, Stock: 3, BeginAt: past(), EndAt: future()},
			Buyers: map[int64]int64{1: 11, 2: 12}}
		if err := s.res.Live().Restore(ctx, sale, stale); err == nil {
			t.Fatal("a rebuild restored under a fence that is no longer its own")
		}
		if n := r.Client.Exists(ctx, s.keys.Orders(1)+":restoring:"+stale).Val(); n != 0 {
			t.Fatal("the stale rebuild staged its buyers")
		}
		if fenced, _ := s.res.Live().Fenced(ctx, 1); !fenced {
			t.Fatal("the stale rebuild lifted the current one's fence")
		}
		if err := s.res.Live().Restore(ctx, sale, current); err != nil {
			t.Fatalf("the current rebuild: %v", err)
		}
		if n := r.Client.HLen(ctx, s.keys.Orders(1)).Val(); n != 2 {
			t.Fatalf("%d buyers, want 2", n)
		}
	})
}
