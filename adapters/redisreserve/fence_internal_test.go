package redisreserve

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// voucherOnSale is a Reserver on r with voucher id on sale (3 units, one
// bucket), and the voucher's keys.
func voucherOnSale(t *testing.T, r testenv.Redis, id int64) (*Reserver, core.Voucher, BucketKeys) {
	t.Helper()
	res, err := New(r.Client, Config{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v := core.Voucher{ID: id, Title: "t", Stock: 3, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)}
	if err := res.LoadVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return res, v, res.keys.Bucket(v.ID, 0, 1)
}

// TestAFenceReplayedByItsOwnTokenIsItsOwn: a fence call whose reply was
// lost (Redis killed after the write, its AOF kept it; a dropped
// connection) is sent again by go-redis's retry with the same token. The
// replay must find the fence its own, not another rebuild's: else the
// rebuild waits on itself until the fence lapses (10 s without an answer
// for the voucher's shoppers, found by the history check). Another token
// is still refused, and the token lifts the fence.
func TestAFenceReplayedByItsOwnTokenIsItsOwn(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		res, v, bk := voucherOnSale(t, r, 5)
		fence := func(token string) int {
			n, err := fenceScript.Run(ctx, r.Client, []string{bk.Window, bk.Stock}, token, 10_000).Int()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if fence("A") != 1 {
			t.Fatal("the first fence was refused")
		}
		if fence("A") != 1 {
			t.Fatal("the replay of the same fence was refused as another rebuild's")
		}
		if fence("B") != 0 {
			t.Fatal("another rebuild took a fence that is held")
		}
		if fenced, err := res.Live().Fenced(ctx, v.ID); err != nil || !fenced {
			t.Fatalf("Fenced = %v, %v after the replay", fenced, err)
		}
		if err := res.Live().Unfence(ctx, v.ID, "A"); err != nil {
			t.Fatal(err)
		}
		if fenced, _ := res.Live().Fenced(ctx, v.ID); fenced {
			t.Fatal("the fence's own token did not lift it")
		}
	})
}

// TestARestoreReplayedAfterItsReplyWasLostIsDone: the restore's reply can
// be lost as the fence's can; go-redis's resend then finds the fence lifted
// and must answer restored (its generation is there), not "the fence
// expired", which would report a rebuild that succeeded as failed. A
// restore under another token still changes nothing.
func TestARestoreReplayedAfterItsReplyWasLostIsDone(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		_, v, bk := voucherOnSale(t, r, 6)
		if n, err := fenceScript.Run(ctx, r.Client, []string{bk.Window, bk.Stock}, "T", 10_000).Int(); err != nil || n != 1 {
			t.Fatalf("fence: %d, %v", n, err)
		}
		restore := func(token string) int {
			n, err := restoreScript.Run(ctx, r.Client,
				[]string{bk.Stock, bk.Window, bk.Orders, bk.Orders + ":restoring:" + token, bk.Transfers(), bk.Forgets()},
				token, v.BeginAt.UnixMilli(), v.EndAt.UnixMilli(), 2, "inc", 0, token, 1, 2).Int()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if restore("T") != 1 {
			t.Fatal("the restore under its fence was refused")
		}
		if restore("T") != 1 {
			t.Fatal("the replay of a restore that was done answered the fence expired")
		}
		if restore("U") != 0 {
			t.Fatal("a restore without the fence changed the voucher")
		}
		if n, _ := r.Client.Get(ctx, bk.Stock).Int64(); n != 2 {
			t.Fatalf("stock %d, want the restored 2", n)
		}
	})
}
