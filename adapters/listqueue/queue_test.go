package listqueue_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/listqueue"
	"github.com/seckill-lab/seckill/adapters/redisreserve/saletest"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

func backend(r testenv.Redis, reliable bool) queuetest.Backend {
	const ttl = 400 * time.Millisecond
	sale := testenv.Redis{Client: r.Client, Prefix: r.Prefix + map[bool]string{false: "plain:", true: "reliable:"}[reliable]}
	openAs := func(t *testing.T, ns, process string) core.Queue {
		return listqueue.New(r.Client, listqueue.Config{
			Key: saletest.QueueKey(sale, ns), Reliable: reliable, HeartbeatTTL: ttl,
			ReapInterval: 50 * time.Millisecond, ConsumerPrefix: process,
		}, nil)
	}
	b := queuetest.Backend{
		Open: func(t *testing.T, ns string) core.Queue { return openAs(t, ns, "") },
		// Plain and reliable runs use the same namespaces: their sales
		// need keys of their own too.
		Sell: saletest.Sell(sale),
		// SIGKILL: the heartbeats stop and nothing is acked or cleaned up.
		Crash:          func(_ *testing.T, q core.Queue) { q.Close() },
		Shared:         true,
		RedeliveryWait: ttl,
	}
	if reliable {
		b.OpenAs = openAs
	}
	return b
}

func TestConformance(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		t.Run("plain", func(t *testing.T) { queuetest.Run(t, backend(r, false)) })
		t.Run("reliable", func(t *testing.T) { queuetest.Run(t, backend(r, true)) })
	})
}

// TestReclaimedMessagesCountTheirDeliveries: a message returned by the
// reaper carries its delivery count, so the pipeline can dead-letter one
// that keeps killing its consumer.
func TestReclaimedMessagesCountTheirDeliveries(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		b := backend(r, true)
		for attempt := 1; attempt <= 3; attempt++ {
			q := b.Open(t, "attempts")
			if attempt == 1 {
				b.Sell(t, "attempts", q, queuetest.Order(1))
			}
			c, err := q.Consumer(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			var ds []core.Delivery
			deadline := time.Now().Add(5 * time.Second)
			for len(ds) == 0 && time.Now().Before(deadline) {
				q.(*listqueue.Queue).Reap(context.Background())
				ds, _ = c.Fetch(context.Background(), 10)
			}
			if len(ds) != 1 || ds[0].Attempt != attempt {
				t.Fatalf("delivery %d: got %+v, want one message on attempt %d", attempt, ds, attempt)
			}
			q.Close() // dies holding it
		}
	})
}

// TestRestartUnderTheSameNameTakesBackItsListAtOnce: a process restarted
// with a stable consumer name, while its predecessor's heartbeat has not
// expired yet, takes back what the predecessor held.
func TestRestartUnderTheSameNameTakesBackItsListAtOnce(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		open := func() *listqueue.Queue {
			return listqueue.New(r.Client, listqueue.Config{Key: r.Prefix + "same", Reliable: true,
				ConsumerPrefix: "pod-0", HeartbeatTTL: time.Hour}, nil)
		}
		before := open()
		r.Client.LPush(context.Background(), r.Prefix+"same", queuetest.Body(1), queuetest.Body(2))
		c, _ := before.Consumer(context.Background(), 0)
		if ds, _ := c.Fetch(context.Background(), 10); len(ds) != 2 {
			t.Fatalf("fetched %d, want 2", len(ds))
		}
		before.Close() // dies; its heartbeat would live for an hour

		after := open()
		defer after.Close()
		c2, err := after.Consumer(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		ds, _ := c2.Fetch(context.Background(), 10)
		if len(ds) != 2 || ds[0].Attempt != 2 {
			t.Fatalf("after the restart got %+v, want both messages on their second attempt", ds)
		}
	})
}

// TestMessagesMovedWithALostReplyAreFetchedAgain: a move into the
// processing list ran in Redis and its reply never came back (a reset, a
// Redis restart, a timeout). The consumer lives, so no reaper takes its
// list back: after the failed fetch it looks at its own processing list,
// and delivers what is there beyond what it holds.
func TestMessagesMovedWithALostReplyAreFetchedAgain(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		key := r.Prefix + "lost"
		q := listqueue.New(r.Client, listqueue.Config{Key: key, Reliable: true, ConsumerPrefix: "pod", HeartbeatTTL: time.Hour,
			Block: 50 * time.Millisecond}, nil)
		defer q.Close()
		c, err := q.Consumer(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		r.Client.LPush(ctx, key, queuetest.Body(1), queuetest.Body(2), queuetest.Body(3))
		held := fetchIDs(t, c, 1) // one fetched and held, not acked
		// What the lost reply did: two moved into this consumer's list.
		for range 2 {
			if err := r.Client.LMove(ctx, key, key+":processing:pod-0", "RIGHT", "LEFT").Err(); err != nil {
				t.Fatal(err)
			}
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.Fetch(cancelled, 10); err == nil {
			t.Fatal("a fetch on a cancelled context succeeded")
		}
		got := fetchIDs(t, c, 10)
		if len(got) != 2 || got[0] == held[0] || got[1] == held[0] {
			t.Fatalf("after the failed fetch: %v (holding %v); want the 2 stranded messages, not the held one", got, held)
		}
	})
}

func fetchIDs(t *testing.T, c core.Consumer, max int) []int64 {
	t.Helper()
	var ids []int64
	deadline := time.Now().Add(2 * time.Second)
	for len(ids) == 0 && time.Now().Before(deadline) {
		ds, err := c.Fetch(context.Background(), max)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			o, err := core.DecodeOrder(d.Body)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, o.ID)
		}
	}
	return ids
}

// TestAReliableConsumerDrainsAFullRedis: on a Redis out of memory under
// noeviction — every command that may grow memory refused, the heartbeat's
// SET and BLMOVE among them — a reliable consumer still fetches and acks
// every queued message: draining the queue is what frees the memory. It
// stopped instead, and the lab's sale on a full Redis counted 651 answered
// orders never persisted in this mode (none in plain mode).
func TestAReliableConsumerDrainsAFullRedis(t *testing.T) {
	rp := redistopology.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(rp.Port)})
	defer rdb.Close()
	ctx := context.Background()
	const key, n = "full:orders:list", 200
	q := listqueue.New(rdb, listqueue.Config{Key: key, Reliable: true, ConsumerPrefix: "pod", HeartbeatTTL: time.Hour,
		Block: 50 * time.Millisecond}, nil)
	defer q.Close()
	c, err := q.Consumer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rdb.LPush(ctx, key, queuetest.Body(int64(i+1)))
	}
	used, err := strconv.ParseInt(strings.TrimSpace(infoField(rdb.Info(ctx, "memory").Val(), "used_memory")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used/2, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	full := func() bool { return strings.HasPrefix(fmt.Sprint(rdb.Set(ctx, "probe", "x", 0).Err()), "OOM") }
	if !full() {
		t.Fatal("Redis takes writes: the test would test nothing")
	}
	got := map[string]bool{}
	for deadline := time.Now().Add(15 * time.Second); len(got) < n && time.Now().Before(deadline); {
		ds, err := c.Fetch(ctx, 50)
		if err != nil {
			t.Fatalf("fetch from a full Redis: %v", err)
		}
		if err := c.Ack(ctx, ds); err != nil {
			t.Fatalf("ack on a full Redis: %v", err)
		}
		for _, d := range ds {
			got[string(d.Body)] = true
		}
	}
	if len(got) != n || rdb.LLen(ctx, key).Val() != 0 || rdb.LLen(ctx, key+":processing:pod-0").Val() != 0 {
		t.Fatalf("drained %d of %d; %d queued, %d in processing", len(got), n, rdb.LLen(ctx, key).Val(), rdb.LLen(ctx, key+":processing:pod-0").Val())
	}
	if !full() {
		t.Fatal("Redis took writes by the end: the drain was not tested out of memory throughout")
	}
}

func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
