package kafkaqueue_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// TestDefaultGroupAdoptsTheLegacyOffsets: the default group is the
// topic's own, and its first start resumes from the offsets the legacy
// group, seckill-persisters, committed on the topic: the orders consumed
// under the old name are not delivered again.
func TestDefaultGroupAdoptsTheLegacyOffsets(t *testing.T) {
	seeds := brokers(t)
	ctx := context.Background()
	topic := "legacy_" + testenv.RandomSuffix()
	cfg := kafkaqueue.Config{Brokers: seeds, Topic: topic, Partitions: 2, SessionTimeout: 6 * time.Second,
		Block: 200 * time.Millisecond}
	old := cfg
	old.Group = "seckill-persisters"
	q1, err := kafkaqueue.New(ctx, old, testenv.Log(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTopics(seeds, q1.Config()) })
	var orders []core.Order
	for id := int64(1); id <= 10; id++ {
		orders = append(orders, core.Order{ID: id, UserID: id, VoucherID: 1, CreatedAt: time.Now()})
	}
	if err := q1.Forward(ctx, orders); err != nil {
		t.Fatal(err)
	}
	c1, err := q1.Consumer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := fetchIDs(t, c1, 6, true); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("the legacy group's member got %v, want 1..6 in order", got)
	}
	q1.Close()

	q2, err := kafkaqueue.New(ctx, cfg, testenv.Log(t))
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	if g := q2.Config().Group; g != topic+"_persisters" {
		t.Fatalf("default group %q, want %q", g, topic+"_persisters")
	}
	c2, err := q2.Consumer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := fetchIDs(t, c2, 4, false)
	if !slices.Equal(got, []int64{7, 8, 9, 10}) {
		t.Fatalf("the new group's first start got %v, want 7..10: it did not resume from the legacy offsets", got)
	}
	// Nothing more: a group that started from the beginning would deliver
	// 1..6 as well.
	if more := fetchIDs(t, c2, 0, false); len(more) != 0 {
		t.Fatalf("the new group then got %v as well", more)
	}
}

// fetchIDs fetches until it has n orders (or, for n 0, for two seconds),
// acking them if ack, and returns their ids in delivery order.
func fetchIDs(t *testing.T, c core.Consumer, n int, ack bool) []int64 {
	t.Helper()
	var ids []int64
	wait := 20 * time.Second
	if n == 0 {
		wait = 2 * time.Second
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline) && (n == 0 || len(ids) < n); {
		limit := 100
		if n > 0 {
			limit = n - len(ids)
		}
		ds, err := c.Fetch(context.Background(), limit)
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
		if ack {
			if err := c.Ack(context.Background(), ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ids
}
