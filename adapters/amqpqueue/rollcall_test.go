package amqpqueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/adapters/internal/brokerevent"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// TestHoldingSeesEveryOrderInAnyProcess: the roll call a rebuild after
// Redis's loss waits on. Two processes share the queue; the one asking has
// no consumer. It must see orders ready, orders another process's consumer
// holds unacked, a consumer that answers no roll call, and orders a killed
// process held (back in the queue) — and nothing once all are acked.
func TestHoldingSeesEveryOrderInAnyProcess(t *testing.T) {
	url := testenv.BrokerURL(t, testenv.AMQPURLEnv)
	if url == "" {
		t.Skipf("%s is not set: RabbitMQ not tested (CI sets it)", testenv.AMQPURLEnv)
	}
	ctx := context.Background()
	cfg := amqpqueue.Config{URL: url, Queue: brokerevent.Name("rollcall"+time.Now().Format("150405.000000")+":", "orders"),
		Block: 100 * time.Millisecond}
	open := func(process string) *amqpqueue.Queue {
		c := cfg
		c.ConsumerPrefix = process
		q, err := amqpqueue.New(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	asker, worker := open("asker"), open("worker")
	t.Cleanup(func() { amqpqueue.Remove(url, cfg.Queue) })
	holding := func() string {
		t.Helper()
		what, err := asker.Holding(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return what
	}
	// Answers come within the roll call's window; a process answers from
	// its start, so wait for both (nothing is held yet).
	waitFor(t, "both processes to answer the roll call", func() bool { return holding() == "" })

	orders := []core.Order{{ID: 1, UserID: 1, VoucherID: 9}, {ID: 2, UserID: 2, VoucherID: 9}, {ID: 3, UserID: 3, VoucherID: 9}}
	if err := asker.Forward(ctx, orders); err != nil {
		t.Fatal(err)
	}
	if what := holding(); !strings.Contains(what, "3 orders queued") {
		t.Fatalf("3 orders published, none consumed: holding %q, want 3 queued", what)
	}

	c, err := worker.Consumer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []core.Delivery
	waitFor(t, "the worker to fetch the 3 orders", func() bool {
		ds, err := c.Fetch(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ds...)
		return len(got) == 3
	})
	if what := holding(); !strings.Contains(what, "holds 3 orders unacked") {
		t.Fatalf("another process holds 3 unacked: holding %q, want them seen", what)
	}
	if err := c.Ack(ctx, got); err != nil {
		t.Fatal(err)
	}
	if what := holding(); what != "" {
		t.Fatalf("every order acked: holding %q, want nothing", what)
	}

	// A consumer that is not this package's answers no roll call: what it
	// holds cannot be known, so the queue is not called empty.
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	foreign, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := foreign.Consume(cfg.Queue, "foreign", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if what := holding(); !strings.Contains(what, "2 consumers and 1 answered") {
		t.Fatalf("a consumer that answers no roll call: holding %q, want it counted", what)
	}
	foreign.Close()

	// A process killed while it held orders: RabbitMQ puts them back.
	if err := asker.Forward(ctx, orders[:2]); err != nil {
		t.Fatal(err)
	}
	got = nil
	waitFor(t, "the worker to fetch the 2 orders", func() bool {
		ds, _ := c.Fetch(ctx, 10)
		got = append(got, ds...)
		return len(got) == 2
	})
	worker.Close()
	if what := holding(); !strings.Contains(what, "2 orders queued") {
		t.Fatalf("the process that held 2 orders is gone: holding %q, want them queued again", what)
	}
}

func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
