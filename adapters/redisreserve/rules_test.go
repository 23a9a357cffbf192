package redisreserve_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/reservationtest"
)

// TestRules: the Lua reservation keeps the rule book, on each Redis, with
// one round trip per reservation, coalesced, and batched.
func TestRules(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		for _, mode := range []struct {
			name     string
			coalesce bool
			batch    int
			prefix   string
		}{{"plain", false, 0, "p:"}, {"coalesced", true, 0, "c:"}, {"batched", false, 16, "b:"}} {
			t.Run(mode.name, func(t *testing.T) {
				prefix := r.Prefix + mode.prefix
				res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: prefix, Coalesce: mode.coalesce,
					Batch: mode.batch, Handoff: handoff("xadd", prefix+"orders")})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				if err := res.Load(ctx); err != nil {
					t.Fatal(err)
				}
				var ids atomic.Int64
				reservationtest.Run(t, reservationtest.Subject{
					Reserver: res,
					Board:    res,
					Create: func(t *testing.T, v core.Voucher) int64 {
						v.ID = ids.Add(1)
						if err := res.LoadVoucher(ctx, v); err != nil {
							t.Fatal(err)
						}
						return v.ID
					},
					Now: func(t *testing.T) time.Time {
						now, err := r.Client.Time(ctx).Result()
						if err != nil {
							t.Fatal(err)
						}
						return now
					},
				})
			})
		}
	})
}
