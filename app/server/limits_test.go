package server

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/go-redis/redis_rate/v10"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

// commandCounter counts the commands a client sends.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// TestRateLimitZeroCostsNothing: a configured rate of 0 turns the limit
// off, and off means no Redis command per request — redis_rate's
// PerSecond(0) is not its zero Limit, so this was once a round trip per
// seckill with the limit "off".
func TestRateLimitZeroCostsNothing(t *testing.T) {
	r := testenv.Miniredis(t)
	counter := &commandCounter{}
	r.Client.AddHook(counter)
	limits := newRateLimits(r.Client, r.Prefix, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		limit    redis_rate.Limit
		commands bool
	}{
		{redis_rate.PerSecond(0), false},
		{redis_rate.PerMinute(0), false},
		{redis_rate.PerSecond(1000), true},
	} {
		counter.n.Store(0)
		app := fiber.New()
		app.Get("/", limits.limit("test", tc.limit, func(*fiber.Ctx) string { return "k" }),
			func(c *fiber.Ctx) error { return c.SendString("ok") })
		for range 3 {
			resp, err := app.Test(httptest.NewRequest("GET", "/", nil))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("limit %v: %v %v", tc.limit, resp, err)
			}
		}
		if got := counter.n.Load(); (got > 0) != tc.commands {
			t.Errorf("limit %v: %d Redis commands for 3 requests, want any: %v", tc.limit, got, tc.commands)
		}
	}
}
