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
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
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
