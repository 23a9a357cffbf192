package server

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/go-redis/redis_rate/v10"
	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

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
		counter.take()
		app := fiber.New()
		app.Get("/", limits.limit("test", tc.limit, func(*fiber.Ctx) string { return "k" }),
			func(c *fiber.Ctx) error { return c.SendString("ok") })
		for range 3 {
			resp, err := app.Test(httptest.NewRequest("GET", "/", nil))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("limit %v: %v %v", tc.limit, resp, err)
			}
		}
		if got := len(counter.take()); (got > 0) != tc.commands {
			t.Errorf("limit %v: %d Redis commands for 3 requests, want any: %v", tc.limit, got, tc.commands)
		}
	}
}
