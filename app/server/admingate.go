package server

import (
	"crypto/subtle"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
)

// Failed admin authentications per client address: at most
// adminFailures in adminFailureWindow, counted in Redis so that every
// instance behind a load balancer counts the same guesses. The review sent
// 300 wrong tokens in 1.1 s and was answered 300 × 401.
const (
	adminFailures      = 10
	adminFailureWindow = time.Minute
)

// adminGate is the admin token's check on /api/admin/*, the dashboard's
// data and /metrics on the API listener: the bearer token compared in
// constant time, and an address past its failures refused before any
// comparison (429 rate_limited with Retry-After), even with the right
// token, so that a guesser learns nothing more until the window ends.
type adminGate struct {
	token    []byte
	rdb      redis.UniversalClient
	prefix   string
	client   func(*fiber.Ctx) string
	failures prometheus.Counter
	log      *slog.Logger
}

// newAdminGate builds the gate and registers its metric,
// seckill_admin_auth_failures_total.
func newAdminGate(token string, rdb redis.UniversalClient, prefix string, client func(*fiber.Ctx) string, reg prometheus.Registerer, log *slog.Logger) *adminGate {
	failures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_admin_auth_failures_total", Help: "Requests to admin endpoints with a missing or wrong admin token (those refused 429 past the per-address limit included).",
	})
	reg.MustRegister(failures)
	return &adminGate{token: []byte(token), rdb: rdb, prefix: prefix + "adminfail:", client: client, failures: failures, log: log}
}

// require is the handler in front of an admin endpoint.
func (g *adminGate) require(c *fiber.Ctx) error {
	key := g.prefix + g.client(c)
	ctx := c.UserContext()
	if n, _ := g.rdb.Get(ctx, key).Int(); n >= adminFailures {
		g.failures.Inc()
		return g.refuse(c, key)
	}
	raw, ok := bearer(c)
	if ok && subtle.ConstantTimeCompare([]byte(raw), g.token) == 1 {
		return c.Next()
	}
	g.failures.Inc()
	// The window starts at an address's first failure; a Redis that does
	// not answer leaves the failure uncounted (the answer is 401 all the
	// same), as the other limits let a request through.
	pipe := g.rdb.TxPipeline()
	pipe.SetNX(ctx, key, 0, adminFailureWindow)
	incr := pipe.Incr(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		g.log.Warn("admin failure limit unavailable; failure not counted", "err", err)
	} else if incr.Val() > adminFailures {
		return g.refuse(c, key)
	}
	return core.E(core.CodeUnauthorized, "admin token required")
}

// refuse answers 429 with the time left in the address's window.
func (g *adminGate) refuse(c *fiber.Ctx, key string) error {
	left, err := g.rdb.PTTL(c.UserContext(), key).Result()
	if err != nil || left <= 0 {
		left = adminFailureWindow
	}
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(math.Ceil(left.Seconds()))))
	return core.E(core.CodeRateLimited, "too many failed admin authentications from this address, retry later")
}
