// Package saletest sells orders to a queue through the sale's real
// reservation path, for the conformance suite and other tests.
package saletest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/relay"
)

// Sell sells orders to a queue through the sale's real path on r:
// core.Seckill over the Lua reservation, which runs the queue's own
// hand-off (core.Capabilities.Handoff) or is followed by its Publisher, and
// released if the queue refuses. It is queuetest.Backend.Sell for every
// backend, so the conformance suite never feeds a queue by a hand-copied
// command. Each namespace has its own keys and an open voucher of
// unlimited stock for the orders' voucher ids.
func Sell(r testenv.Redis) func(t *testing.T, ns string, q core.Queue, o core.Order) error {
	var loaded sync.Map // ns/voucher -> struct{}
	return func(t *testing.T, ns string, q core.Queue, o core.Order) error {
		t.Helper()
		res, publisher, err := redisreserve.ForQueue(r.Client, q, redisreserve.Config{Prefix: r.Prefix + ns + ":"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		key := ns + "/" + strconv.FormatInt(o.VoucherID, 10)
		if _, done := loaded.Load(key); !done {
			v := core.Voucher{ID: o.VoucherID, Stock: core.MaxStock,
				BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(24 * time.Hour)}
			if err := res.LoadVoucher(ctx, v); err != nil {
				t.Fatal(err)
			}
			loaded.Store(key, struct{}{})
		}
		id, err := core.NewSeckill(core.SeckillConfig{IDs: fixedID(o.ID), Reserver: res, Publisher: publisher}).Buy(ctx, o.UserID, o.VoucherID)
		if err == nil && id != o.ID {
			t.Fatalf("sold order %d as %d: the user already held an order", o.ID, id)
		}
		return err
	}
}

// fixedID hands out one given order id, so a test chooses its orders' ids.
type fixedID int64

func (f fixedID) NextID(context.Context) (int64, error) { return int64(f), nil }

// QueueKey is a key for a queue that Sell(r) feeds in namespace ns: it
// carries the hash tag of the vouchers Sell loads there (the one shard's),
// so on a Redis Cluster each reservation's keys share one slot.
func QueueKey(r testenv.Redis, ns string) string {
	return redisreserve.Keys{Prefix: r.Prefix + ns + ":"}.ShardKey("queue", 0)
}

// Relayed joins broker, an outside broker's queue, to an outbox on r in
// namespace ns (a streamgroup stream on QueueKey(r, ns), read by the
// relays' group) as the server does (relay.New), so Sell feeds the
// broker through the real path: the reservation, the outbox, the relay.
// claimAfter is how long a dead relay's entries wait to be claimed.
func Relayed(t testing.TB, r testenv.Redis, ns string, broker core.Queue, claimAfter time.Duration) core.Queue {
	t.Helper()
	outbox, err := streamgroup.New(context.Background(), r.Client, streamgroup.Config{
		Stream: QueueKey(r, ns), Group: "seckill-relays", ClaimMinIdle: claimAfter,
		ClaimInterval: claimAfter / 4, Block: 100 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := relay.New(outbox, broker, relay.Config{RetryInitial: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Running is a queue whose duties (a relayed queue's relays among them)
// run from Open to Close, as in a process that runs consumers; Crash stops
// them as a kill would, without Close's cleanup.
type Running struct {
	core.Queue
	stop context.CancelFunc
	done chan struct{}
}

// Run starts q's duties.
func Run(q core.Queue) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{Queue: q, stop: cancel, done: make(chan struct{})}
	go func() { core.RunQueueDuties(ctx, q, nil); close(r.done) }()
	return r
}

// Capabilities are the queue's without its duties: Run runs them from
// Open to Close, and a second set (queuetest's consumers run a queue's
// duties, as a pipeline does) would run two relays of one shard under one
// consumer name, both re-reading its pending outbox entries, so the broker
// would get them twice.
func (r *Running) Capabilities() core.Capabilities {
	caps := core.CapabilitiesOf(r.Queue)
	caps.Duties = nil
	return caps
}

// Halt stops the duties and waits for them.
func (r *Running) Halt() {
	r.stop()
	<-r.done
}

// Close stops the duties, then closes the queue.
func (r *Running) Close() error {
	r.Halt()
	return r.Queue.Close()
}
