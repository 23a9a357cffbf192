// Package logincode issues and checks the one-time codes of phone login,
// kept in Redis so every instance sees them.
package logincode

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
)

// Config tunes the codes. Zero values take the defaults.
type Config struct {
	// Prefix starts every key. Default "seckill:".
	Prefix string
	// TTL is how long a code is valid. Default 5m.
	TTL time.Duration
	// Resend is the shortest wait between two codes for a phone. Default 60s.
	Resend time.Duration
	// MaxTries wrong guesses burn the code. Default 5.
	MaxTries int64
}

// Codes implements issuing and verification.
type Codes struct {
	rdb redis.UniversalClient
	cfg Config
}

func New(rdb redis.UniversalClient, cfg Config) *Codes {
	if cfg.Prefix == "" {
		cfg.Prefix = "seckill:"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * time.Minute
	}
	if cfg.Resend <= 0 {
		cfg.Resend = 60 * time.Second
	}
	if cfg.MaxTries <= 0 {
		cfg.MaxTries = 5
	}
	return &Codes{rdb: rdb, cfg: cfg}
}

// ErrTooSoon: a code was sent to this phone less than Resend ago.
var ErrTooSoon = core.E(core.CodeRateLimited, "a code was sent recently, wait before asking again")

// A phone's keys share its hash tag: Issue writes two of them in one
// MULTI, which a Redis Cluster allows only within one slot.
func (c *Codes) codeKey(phone string) string   { return c.cfg.Prefix + "login:code:{" + phone + "}" }
func (c *Codes) triesKey(phone string) string  { return c.cfg.Prefix + "login:tries:{" + phone + "}" }
func (c *Codes) resendKey(phone string) string { return c.cfg.Prefix + "login:resend:{" + phone + "}" }

// Issue makes a new six-digit code for phone, replacing any older one.
func (c *Codes) Issue(ctx context.Context, phone string) (string, error) {
	ok, err := c.rdb.SetNX(ctx, c.resendKey(phone), 1, c.cfg.Resend).Result()
	if err != nil {
		return "", fmt.Errorf("logincode: %w", err)
	}
	if !ok {
		return "", ErrTooSoon
	}
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", fmt.Errorf("logincode: random: %w", err)
	}
	code := fmt.Sprintf("%06d", n.Int64())
	_, err = c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, c.codeKey(phone), code, c.cfg.TTL)
		p.Del(ctx, c.triesKey(phone))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("logincode: %w", err)
	}
	return code, nil
}

// Verify reports whether code is phone's current code, and consumes it if
// so. MaxTries wrong guesses delete the code, so it cannot be brute-forced.
func (c *Codes) Verify(ctx context.Context, phone, code string) (bool, error) {
	want, err := c.rdb.Get(ctx, c.codeKey(phone)).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("logincode: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
		if err := c.rdb.Del(ctx, c.codeKey(phone), c.triesKey(phone)).Err(); err != nil {
			return false, fmt.Errorf("logincode: %w", err)
		}
		return true, nil
	}
	tries, err := c.rdb.Incr(ctx, c.triesKey(phone)).Result()
	if err != nil {
		return false, fmt.Errorf("logincode: %w", err)
	}
	if tries == 1 {
		c.rdb.Expire(ctx, c.triesKey(phone), c.cfg.TTL)
	}
	if tries >= c.cfg.MaxTries {
		c.rdb.Del(ctx, c.codeKey(phone))
	}
	return false, nil
}
