// Package logincode issues and checks the one-time codes of phone login,
// kept in Redis so every instance sees them. Issuing, judging and
// withdrawing a code are each one Lua script (lua/issue_code.lua,
// check_code.lua, withdraw_code.lua): parallel guesses are judged one at a
// time, so the guess limit holds however many arrive at once.
//
// Each code belongs to the challenge its request was answered with (an
// unguessable token only the asker sees), and only guesses sent with that
// challenge count against it: an attacker's guesses land on the attacker's
// own codes and can never burn the owner's. What an attacker can do with
// any number of addresses is bounded per phone instead: at most PerPhone
// short codes in any Window, each judged at most MaxTries times; past
// them a phone's codes are long (LongDigits), so guesses at them count for
// nothing. The budget of codes is each asking address's own (PerPhone a
// phone and address): nobody can spend the owner's and lock the phone out.
package logincode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	// MaxTries wrong guesses burn the code. Default 5.
	MaxTries int
	// PerPhone codes at most are issued to one phone for one asking
	// address in any Window (SECKILL_CODES_PER_PHONE), and as many of a
	// phone's codes in the Window, whoever asks, are short: the rest are
	// long. Default 5.
	PerPhone int
	// Window is the rolling window of PerPhone. Default 15m.
	Window time.Duration
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
	if cfg.MaxTries <= 0 {
		cfg.MaxTries = 5
	}
	if cfg.PerPhone <= 0 {
		cfg.PerPhone = 5
	}
	if cfg.Window <= 0 {
		cfg.Window = 15 * time.Minute
	}
	return &Codes{rdb: rdb, cfg: cfg, issue: redis.NewScript(lua.IssueCode),
		check: redis.NewScript(lua.CheckCode), withdraw: redis.NewScript(lua.WithdrawCode)}
}

// BudgetSpentError: the asking address was issued its PerPhone codes for
// the phone in the window; the oldest of them leaves it after RetryAfter.
type BudgetSpentError struct{ RetryAfter time.Duration }

func (e *BudgetSpentError) Error() string {
	return "too many codes were sent to this phone from here: use one of them, or ask again in " + e.RetryAfter.Round(time.Second).String()
}

// Unwrap classes the error as rate limited, with its wait.
func (e *BudgetSpentError) Unwrap() error {
	return &core.RateLimitedError{RetryAfter: e.RetryAfter}
}

// ShortDigits and LongDigits are a code's lengths: a phone's first
// PerPhone codes in the window are short; past them, long. Guesses at a
// long code (10^10 of them) add nothing an attacker can count on, however
// many addresses ask: 100,000 long codes judged 5 times each are found
// with odds of 1 in 20,000.
const (
	ShortDigits = 6
	LongDigits  = 10
)

var (
	// codePattern is what a code looks like: six digits, or ten.
	codePattern = regexp.MustCompile(`^(?:[0-9]{6}|[0-9]{10})$`)
	// challengePattern is what Issue makes: 128 random bits in hex.
	challengePattern = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// WellFormed reports whether s could be a code at all; a guess that is not
// is refused before it reaches Redis and counts as no guess.
func WellFormed(s string) bool { return codePattern.MatchString(s) }

// WellFormedChallenge reports whether s could be a challenge Issue made;
// one that is not names no code, and is never looked up.
func WellFormedChallenge(s string) bool { return challengePattern.MatchString(s) }

// The keys of one phone share its hash tag, so each script touches one
// slot.
func (c *Codes) issuedKey(phone string) string { return c.cfg.Prefix + "login:{" + phone + "}:issued" }
func (c *Codes) askedKey(phone, from string) string {
	return c.cfg.Prefix + "login:{" + phone + "}:issued:" + from
}
func (c *Codes) codeKey(phone, challenge string) string {
	return c.cfg.Prefix + "login:{" + phone + "}:code:" + challenge
}

// Issue makes a new code for the phone under a new challenge, asked from
// address from (its limit key), unless that address's budget for the
// phone is spent (BudgetSpentError). Earlier codes of the phone stay
// valid. The code is short, or long once the phone has had its short
// codes in the window.
func (c *Codes) Issue(ctx context.Context, phone, from string) (core.LoginCode, error) {
	short, err := randomDigits(ShortDigits)
	if err != nil {
		return core.LoginCode{}, err
	}
	long, err := randomDigits(LongDigits)
	if err != nil {
		return core.LoginCode{}, err
	}
	var challenge [16]byte
	if _, err := rand.Read(challenge[:]); err != nil {
		return core.LoginCode{}, fmt.Errorf("logincode: random: %w", err)
	}
	lc := core.LoginCode{Phone: phone, Challenge: hex.EncodeToString(challenge[:]), From: from,
		ExpiresAt: time.Now().Add(c.cfg.TTL).UTC().Truncate(time.Second)}
	res, err := c.issue.Run(ctx, c.rdb, []string{c.issuedKey(phone), c.codeKey(phone, lc.Challenge), c.askedKey(phone, from)},
		short, long, lc.Challenge, c.cfg.PerPhone, c.cfg.Window.Milliseconds(), c.cfg.TTL.Milliseconds(), c.cfg.PerPhone).Int64Slice()
	if err != nil {
		return core.LoginCode{}, fmt.Errorf("logincode: issue: %w", err)
	}
	if res[0] != 1 {
		return core.LoginCode{}, &BudgetSpentError{RetryAfter: time.Duration(res[1]) * time.Millisecond}
	}
	lc.Code = map[int64]string{1: short, 2: long}[res[2]]
	return lc, nil
}

// randomDigits is n decimal digits from crypto/rand.
func randomDigits(n int) (string, error) {
	v, err := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil))
	if err != nil {
		return "", fmt.Errorf("logincode: random: %w", err)
	}
	return fmt.Sprintf("%0*d", n, v), nil
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
	// NoCode: no code to judge (never issued, expired, used or burned).
	NoCode
)

// Verify judges code as a guess at the code issued to phone under
// challenge, atomically: the right code is used up, and MaxTries wrong
// guesses burn it. A malformed guess is Wrong and a malformed challenge
// NoCode, neither counted nor sent to Redis.
func (c *Codes) Verify(ctx context.Context, phone, challenge, code string) (Verdict, error) {
	if !WellFormedChallenge(challenge) {
		return NoCode, nil
	}
	if !WellFormed(code) {
		return Wrong, nil
	}
	res, err := c.check.Run(ctx, c.rdb, []string{c.codeKey(phone, challenge)}, code, c.cfg.MaxTries).Int64Slice()
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

// Withdraw takes back a code that could not be delivered: it is gone, and
// no longer counts against the phone's budget.
func (c *Codes) Withdraw(ctx context.Context, lc core.LoginCode) error {
	err := c.withdraw.Run(ctx, c.rdb, []string{c.issuedKey(lc.Phone), c.codeKey(lc.Phone, lc.Challenge), c.askedKey(lc.Phone, lc.From)}, lc.Challenge).Err()
	if err != nil {
		return fmt.Errorf("logincode: withdraw: %w", err)
	}
	return nil
}
