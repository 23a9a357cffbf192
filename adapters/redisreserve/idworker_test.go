package redisreserve

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/faultproxy"
)

func TestIDWorkerIDsAreUniqueAcrossWorkersAndGoroutines(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		// Two workers stand for two server processes sharing the counter.
		workers := []*IDWorker{NewIDWorker(r.Client, IDWorkerConfig{Prefix: r.Prefix, BlockSize: 7}), NewIDWorker(r.Client, IDWorkerConfig{Prefix: r.Prefix, BlockSize: 7})}
		const perGoroutine = 300
		var mu sync.Mutex
		seen := make(map[int64]bool)
		var wg sync.WaitGroup
		for g := range 8 {
			w := workers[g%2]
			wg.Go(func() {
				for range perGoroutine {
					id, err := w.NextID(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if seen[id] {
						t.Errorf("id %d handed out twice", id)
					}
					seen[id] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != 8*perGoroutine {
			t.Fatalf("%d unique ids, want %d", len(seen), 8*perGoroutine)
		}
	})
}

func TestIDWorkerLayoutAndDayRollover(t *testing.T) {
	r := testenv.Miniredis(t)
	w := NewIDWorker(r.Client, IDWorkerConfig{Prefix: r.Prefix, BlockSize: 100})
	day1 := time.Date(2026, 11, 29, 23, 59, 59, 0, time.UTC)
	w.now = func() time.Time { return day1 }
	a, err := w.NextID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a>>32, day1.Unix()-Epoch.Unix(); got != want {
		t.Fatalf("timestamp part = %d, want %d seconds since the epoch", got, want)
	}
	if seq := a & (1<<32 - 1); seq != 1 {
		t.Fatalf("first sequence of the day = %d, want 1", seq)
	}
	ttl := r.Client.TTL(context.Background(), w.keys.IDCounter(day1)).Val()
	if ttl <= 0 || ttl > counterTTL {
		t.Fatalf("counter TTL = %v, want it set and at most %v", ttl, counterTTL)
	}

	// At midnight the rest of the old block is dropped: the new day's
	// counter starts again, and its ids are still above the old ones.
	day2 := day1.Add(2 * time.Second)
	w.now = func() time.Time { return day2 }
	b, err := w.NextID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if seq := b & (1<<32 - 1); seq != 1 {
		t.Fatalf("first sequence of the new day = %d, want 1 (a fresh counter)", seq)
	}
	if b <= a {
		t.Fatalf("id after midnight %d is not above %d", b, a)
	}

	// A clock stepped back over midnight takes a block of the old day's
	// counter again, after the one it had: no id repeats.
	w.now = func() time.Time { return day1 }
	c, err := w.NextID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if seq := c & (1<<32 - 1); seq != 101 {
		t.Fatalf("sequence back on the old day = %d, want 101 (its second block)", seq)
	}
}

// TestARequestWaitingForTheIDWorkerKeepsItsDeadline: with Redis
// blackholed, one request holds the worker while its block's fetch hangs
// to its 2 s deadline; a request behind it with 100 ms left is answered
// at its own deadline, not after the holder's (the fault run's requests
// behind the worker's lock were answered 4 s late past 2 s deadlines).
func TestARequestWaitingForTheIDWorkerKeepsItsDeadline(t *testing.T) {
	r, ok := testenv.RealRedis(t)
	if !ok {
		t.Skip("the blackhole is a proxy to the real Redis")
	}
	opts, err := redis.ParseURL(os.Getenv(testenv.RedisURLEnv))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(opts.Addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Heal)
	opts.Addr, opts.MaxRetries = proxy.Addr(), -1
	client := redis.NewClient(opts)
	t.Cleanup(func() { client.Close() })
	w := NewIDWorker(client, IDWorkerConfig{Prefix: r.Prefix, BlockSize: 1})
	if _, err := w.NextID(context.Background()); err != nil {
		t.Fatal(err)
	}
	proxy.Silence()
	holder, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	held := make(chan struct{})
	go func() { close(held); w.NextID(holder) }() // its block of one is used: it fetches, and hangs
	<-held
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := w.NextID(ctx); err == nil {
		t.Fatal("an id handed out with Redis blackholed")
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("the request behind the worker was answered after %v, its deadline 100 ms", took)
	}
}
