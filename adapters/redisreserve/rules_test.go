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
// one round trip per reservation and coalesced.
func TestRules(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		for _, coalesce := range []bool{false, true} {
			t.Run(map[bool]string{false: "plain", true: "coalesced"}[coalesce], func(t *testing.T) {
				prefix := r.Prefix + map[bool]string{false: "p:", true: "c:"}[coalesce]
				res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: prefix, Coalesce: coalesce,
					Handoff: handoff("xadd", prefix+"orders")})
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
