package redisreserve_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// TestTheHandOffWritesTheConfiguredOrderBody: during a rolling upgrade an
// old writer (JSON, the zero format) and a new one (compact) share a
// voucher and its stream, one call each or batched; every entry is in
// its writer's format and decodes to the order reserved.
func TestTheHandOffWritesTheConfiguredOrderBody(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		stream := r.Prefix + "orders"
		created := time.Now().Truncate(time.Millisecond).UTC()
		var id int64
		for _, w := range []struct {
			body   core.OrderBody
			batch  int
			prefix string
		}{{"", 0, "{"}, {core.OrderBodyJSON, 32, "{"}, {core.OrderBodyCompact, 0, "2:"}, {core.OrderBodyCompact, 32, "2:"}} {
			res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: r.Prefix, Handoff: handoff("xadd", stream),
				Batch: w.batch, OrderBody: w.body, ShopperRate: 5, PayWindow: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Load(ctx); err != nil {
				t.Fatal(err)
			}
			if id == 0 {
				if err := res.LoadVoucher(ctx, core.Voucher{ID: 9, Stock: 10, BeginAt: past(), EndAt: future()}); err != nil {
					t.Fatal(err)
				}
			}
			id++
			o := core.Order{ID: 1000 + id, UserID: id, VoucherID: 9, CreatedAt: created}
			if got, err := res.Reserve(ctx, o); err != nil || got.Result != core.Reserved {
				t.Fatalf("%q batch %d: %+v, %v", w.body, w.batch, got, err)
			}
			last, err := r.Client.XRevRangeN(ctx, stream, "+", "-", 1).Result()
			if err != nil || len(last) != 1 {
				t.Fatalf("the stream: %v, %v", last, err)
			}
			body := last[0].Values["order"].(string)
			if !strings.HasPrefix(body, w.prefix) {
				t.Errorf("%q batch %d wrote %q, want a body starting %q", w.body, w.batch, body, w.prefix)
			}
			if got, err := core.DecodeOrder([]byte(body)); err != nil || got != o {
				t.Errorf("%q batch %d: %q decodes to %+v, %v; want %+v", w.body, w.batch, body, got, err, o)
			}
		}
	})
}
