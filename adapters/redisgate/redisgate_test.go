package redisgate_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisgate"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/consumergate"
)

// truth is the database's setting, as a test sets it.
type truth struct{ setting core.ConsumerSetting }

func (t truth) ConsumerSetting(context.Context) (core.ConsumerSetting, error) {
	return t.setting, nil
}

// TestALaterSettingIsNeverUndoneByARestore: a restore read from the
// database before an operator's action lands after it; the version keeps
// the action's.
func TestALaterSettingIsNeverUndoneByARestore(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		b := redisgate.New(r.Client, r.Prefix)
		if _, ok, err := b.Read(ctx); err != nil || ok {
			t.Fatalf("a new board: ok %v, %v; want none", ok, err)
		}
		if err := b.Write(ctx, core.ConsumerSetting{Paused: true, Version: 7}); err != nil {
			t.Fatal(err)
		}
		if err := b.Restore(ctx, core.ConsumerSetting{PerSecond: 10, Version: 6}); err != nil {
			t.Fatal(err)
		}
		s, ok, err := b.Read(ctx)
		if err != nil || !ok || s != (core.ConsumerSetting{Paused: true, Version: 7}) {
			t.Fatalf("read %+v ok %v err %v, want the paused version 7", s, ok, err)
		}
	})
}

// TestTwoInstancesShareOneCap: two instances' gates charging as fast as
// they can persist 50 orders a second between them, not each.
func TestTwoInstancesShareOneCap(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx, cancel := context.WithCancel(context.Background())
		b := redisgate.New(r.Client, r.Prefix)
		if err := b.Write(ctx, core.ConsumerSetting{PerSecond: 50, Version: 1}); err != nil {
			t.Fatal(err)
		}
		var charged atomic.Int64
		var wg sync.WaitGroup
		var gates []*consumergate.Gate
		for _, name := range []string{"a", "b"} {
			g := consumergate.New(consumergate.Config{Board: b, Truth: truth{}, Instance: name, Poll: 20 * time.Millisecond})
			gates = append(gates, g)
			wg.Go(func() { _ = g.Run(ctx) })
		}
		time.Sleep(100 * time.Millisecond) // both read the cap
		began := time.Now()
		for _, g := range gates {
			for range 3 {
				wg.Go(func() {
					for ctx.Err() == nil {
						n := g.Batch(500)
						g.Charge(ctx, n)
						if ctx.Err() == nil {
							charged.Add(int64(n))
						}
					}
				})
			}
		}
		time.Sleep(3 * time.Second)
		cancel()
		wg.Wait()
		rate := float64(charged.Load()) / time.Since(began).Seconds()
		if rate < 45 || rate > 58 { // 50 a second and the first burst of 5
			t.Fatalf("two instances capped at 50/s in all charged %.1f/s", rate)
		}
		acks, err := b.Acks(context.Background(), 3*time.Second)
		if err != nil || acks["a"] != 1 || acks["b"] != 1 {
			t.Fatalf("acks %v (%v), want a and b at version 1", acks, err)
		}
	})
}

// TestAPauseIsAckedOnceEveryConsumerIsParked: the version is acked only
// when all the consumers the pipeline runs are parked; an instance not
// heard from lately is not listed.
func TestAPauseIsAckedOnceEveryConsumerIsParked(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b := redisgate.New(r.Client, r.Prefix)
		g := consumergate.New(consumergate.Config{Board: b, Truth: truth{}, Instance: "a", Poll: 20 * time.Millisecond})
		g.Runs(2)
		go func() { _ = g.Run(ctx) }()
		if err := b.Write(ctx, core.ConsumerSetting{Paused: true, Version: 3}); err != nil {
			t.Fatal(err)
		}
		acked := func() int64 {
			acks, err := b.Acks(ctx, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			return acks["a"]
		}
		for !g.Paused() { // as a consumer does, Hold once the gate says paused
			time.Sleep(5 * time.Millisecond)
		}
		parked := make(chan struct{})
		go func() { g.Hold(ctx); close(parked) }() // one of two
		time.Sleep(200 * time.Millisecond)
		if v := acked(); v == 3 {
			t.Fatalf("acked version 3 with one consumer of two parked")
		}
		go g.Hold(ctx)
		deadline := time.Now().Add(2 * time.Second)
		for acked() != 3 {
			if time.Now().After(deadline) {
				t.Fatalf("the pause not acked with both consumers parked: %d", acked())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := b.Write(ctx, core.ConsumerSetting{Version: 4}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-parked:
		case <-time.After(2 * time.Second):
			t.Fatal("a parked consumer not let go by the resume")
		}
	})
}
