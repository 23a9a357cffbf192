package redisreserve_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// BenchmarkReserve is one reservation script per op, from parallel
// goroutines, on real Redis when configured: one EVALSHA round trip each
// (plain), or shared pipelines (coalesced).
func BenchmarkReserve(b *testing.B) {
	for _, coalesce := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "coalesced"}[coalesce]
		b.Run(name, func(b *testing.B) {
			r, ok := testenv.RealRedis(b)
			if !ok {
				r = testenv.Miniredis(b)
			}
			res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: r.Prefix,
				Handoff: core.Handoff{Command: []string{"XADD", core.HandoffKey, "*", "order", core.HandoffBody},
					Key: func(int64) string { return r.Prefix + "orders" }}, Coalesce: coalesce})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			res.Load(ctx)
			res.LoadVoucher(ctx, core.Voucher{ID: 1, Stock: 1 << 40, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)})
			var n atomic.Int64
			// 50 goroutines per core at most, like the HTTP load's 50
			// connections: coalescing needs callers waiting together.
			b.SetParallelism(25)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := n.Add(1)
					if _, err := res.Reserve(ctx, core.Order{ID: id, UserID: id, VoucherID: 1, CreatedAt: time.Now()}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
