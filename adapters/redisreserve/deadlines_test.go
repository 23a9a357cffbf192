package redisreserve_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// TestDeadlinesAreHandedOutOnceWhenDue: the reservations' deadlines, kept
// in the order the reservations were made, are handed out by ClaimDue once
// due and only then, each once however many instances claim at the same
// time — a due one behind one not yet due included (an instance whose
// clock is ahead wrote it), a deadline an earlier version kept in the
// sorted set included; an entry that does not parse is dropped, and the
// claim takes at most max at a time.
func TestDeadlinesAreHandedOutOnceWhenDue(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		const window = time.Minute
		res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: r.Prefix, PayWindow: window})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.LoadVoucher(ctx, core.Voucher{ID: 1, Stock: 100, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		past, ahead := now.Add(-2*window), now.Add(time.Hour)
		// In this order: 1..3 due, 4 an hour ahead, 5 and 6 due behind it.
		for _, o := range []struct {
			id int64
			at time.Time
		}{{1, past}, {2, past}, {3, past}, {4, ahead}, {5, past}, {6, past}} {
			got, err := res.Reserve(ctx, core.Order{ID: o.id, UserID: 10 + o.id, VoucherID: 1, CreatedAt: o.at})
			if err != nil || got.Result != core.Reserved {
				t.Fatalf("reserve %d: %+v, %v", o.id, got, err)
			}
		}
		shard := 0 // one shard: every voucher's
		if err := r.Client.RPush(ctx, res.Keys().PayBy(shard), "not a deadline").Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.Client.ZAdd(ctx, res.Keys().Deadlines(shard), redis.Z{Score: float64(past.Add(window).UnixMilli()), Member: "100:7:1"}).Err(); err != nil {
			t.Fatal(err)
		}

		if got, err := res.Live().ClaimDue(ctx, now, 2); err != nil || len(got) != 2 {
			t.Fatalf("claim at most 2: %v, %v", got, err)
		} else if got[0].ID != 100 || got[1].ID != 1 || !got[0].PayBy.Equal(time.UnixMilli(past.Add(window).UnixMilli()).UTC()) {
			t.Fatalf("the sorted set's deadline comes first, with its payBy, then the list's first: %+v", got)
		}
		var mu sync.Mutex
		claimed := []int64{100, 1} // the first claim's
		var wg sync.WaitGroup
		for range 4 { // instances claiming at once
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := res.Live().ClaimDue(ctx, now, 100)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, o := range got {
					if o.VoucherID != 1 || o.UserID != 10+o.ID || !o.PayBy.Equal(time.UnixMilli(past.Add(window).UnixMilli()).UTC()) {
						t.Errorf("claimed %+v: not what was reserved", o)
					}
					claimed = append(claimed, o.ID)
				}
			}()
		}
		wg.Wait()
		slices.Sort(claimed)
		if !slices.Equal(claimed, []int64{1, 2, 3, 5, 6, 100}) {
			t.Fatalf("claimed %v, want each of 1 2 3 5 6 100 once (4 is not due)", claimed)
		}
		if left, _ := r.Client.LRange(ctx, res.Keys().PayBy(shard), 0, -1).Result(); len(left) != 1 {
			t.Fatalf("left in the list: %q, want the one not due", left)
		}
		got, err := res.Live().ClaimDue(ctx, ahead.Add(window), 100)
		if err != nil || len(got) != 1 || got[0].ID != 4 {
			t.Fatalf("an hour later: %+v, %v; want order 4", got, err)
		}
		if n, _ := r.Client.Exists(ctx, res.Keys().PayBy(shard), res.Keys().Deadlines(shard)).Result(); n != 0 {
			t.Fatalf("%d deadline keys left after every deadline was handed out", n)
		}
	})
}
