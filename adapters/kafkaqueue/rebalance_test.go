package kafkaqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// TestRebalanceHandsOverWhatWasAcked: a member that holds orders when a
// second member joins keeps its partitions' revocation waiting until it
// acks them, so the newcomer starts past them: no order is delivered to
// both. Before the hand-off wait the revocation committed below what was
// held and the newcomer delivered it all again.
func TestRebalanceHandsOverWhatWasAcked(t *testing.T) {
	seeds := brokers(t)
	ctx := context.Background()
	q, err := kafkaqueue.New(ctx, kafkaqueue.Config{Brokers: seeds, Topic: "rebalance_" + testenv.RandomSuffix(),
		Group: "rebalance-" + testenv.RandomSuffix(), Partitions: 4, SessionTimeout: 6 * time.Second,
		Block: 200 * time.Millisecond}, testenv.Log(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTopics(seeds, q.Config()) })
	defer q.Close()
	forward := func(from, to int64) {
		t.Helper()
		var orders []core.Order
		for id := from; id <= to; id++ {
			orders = append(orders, core.Order{ID: id, UserID: id, VoucherID: 1 + id%8, CreatedAt: time.Now()})
		}
		if err := q.Forward(ctx, orders); err != nil {
			t.Fatal(err)
		}
	}
	const first = 40
	forward(1, first)

	a, err := q.Consumer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var held []core.Delivery
	deadline := time.Now().Add(20 * time.Second)
	for len(held) < first && time.Now().Before(deadline) {
		ds, err := a.Fetch(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ds...)
	}
	if len(held) != first {
		t.Fatalf("the first member fetched %d of %d", len(held), first)
	}

	var mu sync.Mutex
	got := map[int64]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	consume := func(c core.Consumer) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ds, err := c.Fetch(ctx, 100)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, d := range ds {
				o, err := core.DecodeOrder(d.Body)
				if err != nil {
					t.Error(err)
				}
				got[o.ID]++
			}
			mu.Unlock()
			if err := c.Ack(ctx, ds); err != nil {
				t.Error(err)
			}
		}
	}
	b, err := q.Consumer(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go consume(b) // joins the group: a rebalance takes some of a's partitions
	// a holds its 40 through the join, then acks them, well within the
	// hand-off wait.
	time.Sleep(2 * time.Second)
	if err := a.Ack(ctx, held); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go consume(a)
	time.Sleep(3 * time.Second) // the rebalance ends; both consume
	forward(first+1, first+20)
	deadline = time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // a duplicate would come now
	close(stop)
	wg.Wait()
	a.Close()
	b.Close()
	mu.Lock()
	defer mu.Unlock()
	for id, n := range got {
		if id <= first {
			t.Errorf("order %d, acked by the first member before its partition went, delivered again %d time(s)", id, n)
		} else if n != 1 {
			t.Errorf("order %d delivered %d times", id, n)
		}
	}
	if len(got) != 20 {
		t.Errorf("%d distinct orders after the rebalance, want the 20 new ones", len(got))
	}
}
