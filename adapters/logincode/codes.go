// Package logincode issues and checks the one-time codes of phone login,
// kept in Redis so every instance sees them. Issuing, judging and
// withdrawing a code are each one Lua script (lua/issue_code.lua,
// check_code.lua, withdraw_code.lua): parallel guesses are judged one at a
// time, so the guess limit holds however many arrive at once.
package logincode

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"regexp"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// Config tunes the codes. Zero values take the defaults.
type Config struct {
	// Prefix starts every key. Default "seckill:".
	Prefix string
	// TTL is how long a code is valid. Default 5m.
	TTL time.Duration
	// Resend is the shortest wait between two live codes for a phone; a
	// code used or burned can be replaced at once. Default 60s.
	Resend time.Duration
	// MaxTries wrong guesses burn the code. Default 5.
	MaxTries int
}

// Codes implements issuing and verification.
type Codes struct {
	rdb                    redis.UniversalClient
	cfg                    Config
	issue, check, withdraw *redis.Script
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
	return &Codes{rdb: rdb, cfg: cfg, issue: redis.NewScript(lua.IssueCode),
		check: redis.NewScript(lua.CheckCode), withdraw: redis.NewScript(lua.WithdrawCode)}
}

// TooSoonError: a live code was sent to this phone less than Resend ago.
type TooSoonError struct{ RetryAfter time.Duration }

func (e *TooSoonError) Error() string {
	return "a code was sent recently: use it, or ask again in " + e.RetryAfter.Round(time.Second).String()
}

// Unwrap classes the error as rate limited, with its wait.
func (e *TooSoonError) Unwrap() error {
	return &core.RateLimitedError{RetryAfter: e.RetryAfter}
}

// codePattern is what a code looks like: six digits.
var codePattern = regexp.MustCompile(`^[0-9]{6}$`)

// WellFormed reports whether s could be a code at all; a guess that is not
// is refused before it reaches Redis and counts as no guess.
func WellFormed(s string) bool { return codePattern.MatchString(s) }

// key is the phone's one key: one key, so each script touches one slot.
func (c *Codes) key(phone string) string { return c.cfg.Prefix + "login:{" + phone + "}" }

// Issue makes a new six-digit code the phone's current one, replacing a
// used, burned or old enough code, and resetting the guesses.
func (c *Codes) Issue(ctx context.Context, phone string) (core.LoginCode, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return core.LoginCode{}, fmt.Errorf("logincode: random: %w", err)
	}
	code := fmt.Sprintf("%06d", n.Int64())
	expiresAt := time.Now().Add(c.cfg.TTL).UTC().Truncate(time.Second)
	res, err := c.issue.Run(ctx, c.rdb, []string{c.key(phone)}, code, c.cfg.Resend.Milliseconds(), c.cfg.TTL.Milliseconds()).Int64Slice()
	if err != nil {
		return core.LoginCode{}, fmt.Errorf("logincode: issue: %w", err)
	}
	if res[0] != 1 {
		return core.LoginCode{}, &TooSoonError{RetryAfter: time.Duration(res[1]) * time.Millisecond}
	}
	return core.LoginCode{Phone: phone, Code: code, ExpiresAt: expiresAt}, nil
}

// Verdict is how a guess was judged.
type Verdict int

const (
	// Accepted: the guess was the code, which is now used up.
	Accepted Verdict = iota + 1
	// Wrong: a wrong guess; the code still stands.
	Wrong
	// Burned: a wrong guess, the last one allowed: the code is gone.
	Burned
	// NoCode: no code to judge (never sent, expired, used or burned).
	NoCode
)

// Verify judges code as a guess at phone's current code, atomically: the
// right code is used up, and MaxTries wrong guesses burn it.
func (c *Codes) Verify(ctx context.Context, phone, code string) (Verdict, error) {
	if !WellFormed(code) {
		return Wrong, nil
	}
	res, err := c.check.Run(ctx, c.rdb, []string{c.key(phone)}, code, c.cfg.MaxTries).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("logincode: check: %w", err)
	}
	switch res[0] {
	case 1:
		return Accepted, nil
	case 0:
		return Wrong, nil
	case -1:
		return Burned, nil
	}
	return NoCode, nil
}

// Withdraw takes back a code that could not be delivered, so the phone can
// ask again at once. A newer code of the phone is left alone.
func (c *Codes) Withdraw(ctx context.Context, lc core.LoginCode) error {
	if err := c.withdraw.Run(ctx, c.rdb, []string{c.key(lc.Phone)}, lc.Code).Err(); err != nil {
		return fmt.Errorf("logincode: withdraw: %w", err)
	}
	return nil
}
