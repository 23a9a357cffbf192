package redisreserve_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
)

// TestNudgesReachEveryListener: a nudge published by one instance reaches
// the listeners of all (on a cluster, whatever node each subscribed to);
// each listener resets when its subscription starts; and a listener stops
// promptly when its context ends, though it was blocked reading.
func TestNudgesReachEveryListener(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		n := redisreserve.NewStockNudges(r.Client, r.Prefix, nil)
		type listener struct {
			forgot  chan int64
			changed chan int64
			resets  chan struct{}
			done    chan struct{}
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var ls []listener
		for range 2 {
			l := listener{forgot: make(chan int64, 4), changed: make(chan int64, 4), resets: make(chan struct{}, 4), done: make(chan struct{})}
			go func() {
				defer close(l.done)
				n.Listen(ctx, redisreserve.Nudged{Forget: func(v int64) { l.forgot <- v }, Changed: func(v int64) { l.changed <- v },
					Reset: func() { l.resets <- struct{}{} }})
			}()
			ls = append(ls, l)
		}
		for i, l := range ls {
			select {
			case <-l.resets:
			case <-time.After(5 * time.Second):
				t.Fatalf("listener %d: no reset when its subscription started", i)
			}
		}
		if err := n.NudgeStockBack(context.Background(), 42); err != nil {
			t.Fatal(err)
		}
		for i, l := range ls {
			select {
			case v := <-l.forgot:
				if v != 42 {
					t.Fatalf("listener %d forgot voucher %d, want 42", i, v)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("listener %d did not hear the nudge", i)
			}
		}
		// An operator's change is a nudge of its own kind: forgotten as a
		// change, not as stock that came back.
		if err := n.NudgeChanged(context.Background(), 43); err != nil {
			t.Fatal(err)
		}
		for i, l := range ls {
			select {
			case v := <-l.changed:
				if v != 43 {
					t.Fatalf("listener %d heard voucher %d changed, want 43", i, v)
				}
			case v := <-l.forgot:
				t.Fatalf("listener %d took the change of %d for stock that came back", i, v)
			case <-time.After(5 * time.Second):
				t.Fatalf("listener %d did not hear the change", i)
			}
		}
		cancel()
		for i, l := range ls {
			select {
			case <-l.done:
			case <-time.After(2 * time.Second):
				t.Fatalf("listener %d still running after its context ended", i)
			}
		}
	})
}
