package redisreserve

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

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
		res, err := New(r.Client, Config{Prefix: r.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		v := core.Voucher{ID: 5, Title: "t", Stock: 3, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}
		if err := res.LoadVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
		bk := res.keys.Bucket(v.ID, 0, 1)
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
		if fenced, err := res.Fenced(ctx, v.ID); err != nil || !fenced {
			t.Fatalf("Fenced = %v, %v after the replay", fenced, err)
		}
		if err := res.Unfence(ctx, v.ID, "A"); err != nil {
			t.Fatal(err)
		}
		if fenced, _ := res.Fenced(ctx, v.ID); fenced {
			t.Fatal("the fence's own token did not lift it")
		}
	})
}
