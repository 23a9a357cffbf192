package server

import (
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisrate"
	"github.com/seckill-lab/seckill/core"
)

// rateLimits are request limits kept in Redis, so they hold across every
// instance behind a load balancer. Each check is one atomic GCRA script
// (redis_rate): one round trip, no lock in the process.
//
// Fiber's own limiter middleware was the first choice and was dropped: it
// holds one process-wide mutex across its storage Get and Set, two Redis
// round trips, which serialises every request on the seckill path; and its
// Get-then-Set is not atomic, so two instances can both let a request
// through.
type rateLimits struct {
	limiter *redis_rate.Limiter
	prefix  string
	log     *slog.Logger
}

func newRateLimits(rdb redis.UniversalClient, prefix string, log *slog.Logger) *rateLimits {
	return &rateLimits{limiter: redisrate.NewLimiter(rdb, prefix), prefix: "rl:", log: log}
}

// limit admits at most `limit` requests per key; over it, 429 rate_limited
// with Retry-After. A zero limit admits everything. If Redis does not
// answer the request goes through: the handler behind meets the same Redis
// and answers 503 itself.
func (r *rateLimits) limit(name string, limit redis_rate.Limit, key func(*fiber.Ctx) string) fiber.Handler {
	// Not limit.IsZero(): redis_rate.PerSecond(0) keeps its Period, so a
	// configured 0 would still pay a Redis round trip per request.
	if limit.Rate <= 0 {
		return func(c *fiber.Ctx) error { return c.Next() }
	}
	return func(c *fiber.Ctx) error {
		res, err := r.limiter.Allow(c.UserContext(), r.prefix+name+":"+key(c), limit)
		if err != nil {
			r.log.Warn("rate limiter unavailable; request let through", "limit", name, "err", err)
			return c.Next()
		}
		if res.Allowed == 0 {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(math.Ceil(max(res.RetryAfter, time.Second).Seconds()))))
			return core.E(core.CodeRateLimited, "too many requests, retry later")
		}
		return c.Next()
	}
}

// limitMisses counts the answers voucher_not_found per key; past limit,
// such an answer becomes 429 rate_limited: a client walking made-up ids
// is slowed, while a request that finds its voucher is never counted nor
// refused (the limit costs Redis nothing on the way of a sale). A Redis
// that does not answer leaves the miss as it was.
func (r *rateLimits) limitMisses(limit redis_rate.Limit, key func(*fiber.Ctx) string) fiber.Handler {
	if limit.Rate <= 0 {
		return func(c *fiber.Ctx) error { return c.Next() }
	}
	return func(c *fiber.Ctx) error {
		err := c.Next()
		if core.CodeOf(err) != core.CodeVoucherNotFound {
			return err
		}
		res, lerr := r.limiter.Allow(c.UserContext(), r.prefix+"miss:"+key(c), limit)
		if lerr != nil || res.Allowed > 0 {
			return err
		}
		return &core.RateLimitedError{RetryAfter: res.RetryAfter}
	}
}

func byShopper(c *fiber.Ctx) string { return strconv.FormatInt(shopperID(c), 10) }
