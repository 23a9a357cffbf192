package streamqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve/saletest"
	"github.com/seckill-lab/seckill/adapters/streamqueue"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

func open(t *testing.T, r testenv.Redis, ns string, retention time.Duration) *streamqueue.Queue {
	return openReader(t, r, ns, "", retention)
}

func openReader(t *testing.T, r testenv.Redis, ns, reader string, retention time.Duration) *streamqueue.Queue {
	t.Helper()
	q, err := streamqueue.New(context.Background(), r.Client, streamqueue.Config{
		Stream: saletest.QueueKey(r, ns), Reader: reader, Block: 100 * time.Millisecond, TrimRetention: retention,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func publish(r testenv.Redis, ns string, body []byte) error {
	// What seckill.lua does with handoff "xadd".
	return r.Client.XAdd(context.Background(), &redis.XAddArgs{
		Stream: saletest.QueueKey(r, ns), Values: []any{streamqueue.BodyField, body}}).Err()
}

func TestConformance(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		queuetest.Run(t, queuetest.Backend{
			Open: func(t *testing.T, ns string) core.Queue { return open(t, r, ns, 0) },
			Replay: func(t *testing.T, ns string) core.Queue {
				return openReader(t, r, ns, "replay-"+testenv.RandomSuffix(), 0)
			},
			Sell: saletest.Sell(r),
			// The in-memory cursor dies with the process; the saved one stays.
			Crash:  func(_ *testing.T, q core.Queue) { q.Close() },
			Shared: true,
		})
	})
}

// TestCursorNeverPassesAnUnackedMessage: consumers ack out of order; the
// saved cursor stops before the oldest message still held.
func TestCursorNeverPassesAnUnackedMessage(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := open(t, r, "order", 0)
		for i := int64(1); i <= 4; i++ {
			publish(r, "order", queuetest.Body(i))
		}
		a, _ := q.Consumer(context.Background(), 0)
		b, _ := q.Consumer(context.Background(), 1)
		first, _ := a.Fetch(context.Background(), 2)  // 1, 2
		second, _ := b.Fetch(context.Background(), 2) // 3, 4
		if len(first) != 2 || len(second) != 2 {
			t.Fatalf("fetched %d and %d, want 2 and 2", len(first), len(second))
		}
		b.Ack(context.Background(), second)
		if c := q.Cursor(); c != "0-0" {
			t.Fatalf("cursor %s moved past unacked messages 1 and 2", c)
		}
		a.Ack(context.Background(), first)
		if c := q.Cursor(); c != second[1].ID {
			t.Fatalf("cursor %s, want %s once everything before it is acked", c, second[1].ID)
		}
	})
}

func TestTrimKeepsWhatAReaderHasNotPassed(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := open(t, r, "trim", -1)
		for i := int64(1); i <= 5; i++ {
			publish(r, "trim", queuetest.Body(i))
		}
		c, _ := q.Consumer(context.Background(), 0)
		ds, _ := c.Fetch(context.Background(), 3)
		c.Ack(context.Background(), ds) // cursor at message 3
		removed, err := q.Trim(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		left := r.Client.XLen(context.Background(), saletest.QueueKey(r, "trim")).Val()
		if removed != 2 || left != 3 {
			t.Fatalf("trim removed %d and left %d, want 2 removed and messages 3, 4, 5 kept", removed, left)
		}
	})
}

// TestStatsCountWhatIsWaitingAndWhatIsHeld: Depth is what lies after the
// saved cursor and no consumer holds; Pending what consumers hold.
func TestStatsCountWhatIsWaitingAndWhatIsHeld(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		q := open(t, r, "stats", -1)
		for i := int64(1); i <= 5; i++ {
			publish(r, "stats", queuetest.Body(i))
		}
		// Nothing read yet: the lag is the backlog's span, not the time
		// since 1970 (the dashboard showed 56 years).
		if st, err := q.Stats(ctx); err != nil || st.Lag < 0 || st.Lag > time.Minute {
			t.Fatalf("before any read: %+v, %v; want the lag within the backlog's span", st, err)
		}
		c, _ := q.Consumer(ctx, 0)
		ds, _ := c.Fetch(ctx, 2)
		if st, err := q.Stats(ctx); err != nil || st.Depth != 3 || st.Pending != 2 {
			t.Fatalf("after fetching 2 of 5: %+v, %v; want depth 3, pending 2", st, err)
		}
		c.Ack(ctx, ds)
		if st, err := q.Stats(ctx); err != nil || st.Depth != 3 || st.Pending != 0 {
			t.Fatalf("after acking them: %+v, %v; want depth 3, pending 0", st, err)
		}
	})
}
