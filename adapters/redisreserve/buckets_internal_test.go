package redisreserve

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// TestATransferCutShortIsCompletedOnce: a borrower that dies between the
// lender's take and its own give leaves the units in transit: the voucher
// still counts them (LiveState), and the duty's re-drive gives them once,
// however often it runs and whatever replays each step; a take of an
// expired transfer, or of another generation (a rebuild in between), takes
// nothing.
func TestATransferCutShortIsCompletedOnce(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		shards := SpreadShards(2)
		res, err := New(r.Client, Config{Prefix: r.Prefix, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		v := core.Voucher{ID: 3, Title: "hot", Stock: 10, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour), Buckets: 2}
		if err := res.LoadVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
		borrower, lender := res.keys.Bucket(v.ID, 0, 2), res.keys.Bucket(v.ID, 1, 2)
		stocks := func() (int64, int64) {
			a, _ := r.Client.Get(ctx, borrower.Stock).Int64()
			b, _ := r.Client.Get(ctx, lender.Stock).Int64()
			return a, b
		}
		// The borrower records the transfer, the lender grants half its 5:
		// then the borrower's process dies.
		pend, err := pendScript.Run(ctx, r.Client, []string{borrower.Stock, borrower.Window, borrower.Transfers()}, "T1", 1, borrowWant).Slice()
		if err != nil || pend[0] != int64(1) {
			t.Fatalf("pend: %v %v", pend, err)
		}
		p := pendingTransfer{id: "T1", lender: lender, borrower: borrower, gen: pend[1].(string), at: pend[2].(int64)}
		take := func(p pendingTransfer, maxAge time.Duration) int64 {
			t.Helper()
			n, err := takeScript.Run(ctx, r.Client, []string{lender.Stock, lender.Window, lender.Transfers()},
				p.id, 0, borrowWant, p.gen, p.at, maxAge.Milliseconds()).Int64()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := take(p, transferMaxAge); n != 3 {
			t.Fatalf("take granted %d, want 3 (half of 5, rounded up)", n)
		}
		if n := take(p, transferMaxAge); n != 3 {
			t.Errorf("a replayed take answered %d, want the same 3", n)
		}
		if a, b := stocks(); a != 5 || b != 2 {
			t.Errorf("stocks %d/%d after the take, want 5/2 (3 in transit)", a, b)
		}
		if st, err := res.Live().LiveState(ctx, v.ID); err != nil || st.Stock != 10 {
			t.Errorf("live stock %d, %v; want 10: the 3 in transit still count", st.Stock, err)
		}
		// Too young for the duty: the request that started it may still
		// be giving.
		if n, err := res.RedriveTransfers(ctx, v.ID); err != nil || n != 0 {
			t.Errorf("re-drove %d (%v) of a transfer younger than %v", n, err, transferRedriveAfter)
		}
		// As the duty finds it later: the record backdated.
		old := p
		old.at -= transferRedriveAfter.Milliseconds() + 1000
		r.Client.HSet(ctx, borrower.Transfers(), "in:T1", "1:"+strconv.Itoa(borrowWant)+":"+p.gen+":"+strconv.FormatInt(old.at, 10))
		for range 3 {
			if _, err := res.RedriveTransfers(ctx, v.ID); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := giveScript.Run(ctx, r.Client, []string{borrower.Stock, borrower.Window, borrower.Transfers()}, "T1", 3).Int(); err != nil || n != 0 {
			t.Errorf("a replayed give: %d, %v; want 0 (applied already)", n, err)
		}
		if a, b := stocks(); a != 8 || b != 2 {
			t.Errorf("stocks %d/%d after the re-drive, want 8/2", a, b)
		}
		if st, err := res.Live().LiveState(ctx, v.ID); err != nil || st.Stock != 10 {
			t.Errorf("live stock %d, %v; want 10", st.Stock, err)
		}
		if _, ok, err := res.Live().VerifiedIn(ctx, v.ID); err != nil || !ok {
			t.Errorf("the buckets are not whole after the transfer: %v %v", ok, err)
		}

		// An expired transfer takes nothing, now or ever.
		p2 := p
		p2.id, p2.at = "T2", p.at-transferMaxAge.Milliseconds()-1000
		if n := take(p2, transferMaxAge); n != -2 {
			t.Errorf("an expired take answered %d, want -2", n)
		}
		// A transfer recorded before a rebuild takes nothing after it.
		p3 := p
		p3.id, p3.gen = "T3", "an older generation"
		if n := take(p3, transferMaxAge); n != -3 {
			t.Errorf("a take of another generation answered %d, want -3", n)
		}
		if a, b := stocks(); a != 8 || b != 2 {
			t.Errorf("stocks %d/%d, want 8/2 still", a, b)
		}
	})
}

// TestATransferClosedWithNothingTakesNothingLater: a transfer that a
// settling request completed while the lender was dry (granted none, the
// pending record closed) takes nothing when its own borrower's take comes
// later, after the lender got units back: those units would be taken and
// given to nobody.
func TestATransferClosedWithNothingTakesNothingLater(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		res, err := New(r.Client, Config{Prefix: r.Prefix, Shards: SpreadShards(2)})
		if err != nil {
			t.Fatal(err)
		}
		v := core.Voucher{ID: 5, Title: "hot", Stock: 2, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour), Buckets: 2}
		if err := res.LoadVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
		borrower, lender := res.keys.Bucket(v.ID, 0, 2), res.keys.Bucket(v.ID, 1, 2)
		r.Client.Set(ctx, lender.Stock, 0, 0) // dry (its unit sold, say)
		r.Client.HSet(ctx, lender.Window, "total", 0)
		pend, err := pendScript.Run(ctx, r.Client, []string{borrower.Stock, borrower.Window, borrower.Transfers()}, "T", 1, borrowWant).Slice()
		if err != nil {
			t.Fatal(err)
		}
		p := pendingTransfer{id: "T", lender: lender, borrower: borrower, gen: pend[1].(string), at: pend[2].(int64)}
		// Another request settles it: nothing to take, the record closes.
		if got, err := res.completeTransfer(ctx, p); err != nil || got.units != 0 {
			t.Fatalf("settling: %+v, %v", got, err)
		}
		// The lender gets a unit back (a release); the borrower's own take
		// comes only now.
		r.Client.Set(ctx, lender.Stock, 1, 0)
		r.Client.HSet(ctx, lender.Window, "total", 1)
		if got, err := res.completeTransfer(ctx, p); err != nil || got.units != 0 {
			t.Errorf("the late take: %+v, %v; want nothing", got, err)
		}
		if n, _ := r.Client.Get(ctx, lender.Stock).Int64(); n != 1 {
			t.Errorf("the lender's stock is %d after the closed transfer's late take, want 1 (untouched)", n)
		}
		if st, err := res.Live().LiveState(ctx, v.ID); err != nil || st.Stock != 2 {
			t.Errorf("live stock %d, %v; want 2: no unit lost", st.Stock, err)
		}
	})
}
