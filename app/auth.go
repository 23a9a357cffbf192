package main

import (
	"crypto/subtle"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill-lab/seckill/core"
)

// tokenTTL is how long a shopper's token is valid.
const tokenTTL = 24 * time.Hour

var errUnauthorized = core.E(core.CodeUnauthorized, "missing, invalid or expired token")

// tokens signs and checks shopper JWTs: HS256 only, sub and exp required.
type tokens struct {
	secret []byte
	parser *jwt.Parser
}

func newTokens(secret []byte) *tokens {
	return &tokens{secret: secret, parser: jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(5*time.Second),
	)}
}

func (t *tokens) issue(userID int64, now time.Time) (string, error) {
	return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(userID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(tokenTTL)),
	}).SignedString(t.secret)
}

// shopperClaims are the claims a shopper's token is checked on: the
// subject, and the times the validator enforces. Fewer fields than
// jwt.RegisteredClaims, decoded without its custom unmarshalers: this runs
// on every seckill, and the claims decoding was the largest cost of the
// token check.
type shopperClaims struct {
	Sub string   `json:"sub"`
	Exp *float64 `json:"exp"`
	Nbf *float64 `json:"nbf"`
}

func numericDate(f *float64) (*jwt.NumericDate, error) {
	if f == nil {
		return nil, nil
	}
	sec, frac := math.Modf(*f)
	return jwt.NewNumericDate(time.Unix(int64(sec), int64(frac*1e9))), nil
}

func (c *shopperClaims) GetExpirationTime() (*jwt.NumericDate, error) { return numericDate(c.Exp) }
func (c *shopperClaims) GetNotBefore() (*jwt.NumericDate, error)      { return numericDate(c.Nbf) }
func (c *shopperClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return nil, nil }
func (c *shopperClaims) GetIssuer() (string, error)                   { return "", nil }
func (c *shopperClaims) GetSubject() (string, error)                  { return c.Sub, nil }
func (c *shopperClaims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil }

// userID verifies a token and returns its subject as a user id.
func (t *tokens) userID(raw string) (int64, error) {
	var claims shopperClaims
	_, err := t.parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return t.secret, nil })
	if err != nil {
		return 0, errUnauthorized
	}
	id, err := strconv.ParseInt(claims.Sub, 10, 64)
	if err != nil || id <= 0 {
		return 0, errUnauthorized
	}
	return id, nil
}

func bearer(c *fiber.Ctx) (string, bool) {
	h := c.Get(fiber.HeaderAuthorization)
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}

const localUserID = "userID"

// requireShopper admits a request with a valid shopper token.
func (t *tokens) requireShopper(c *fiber.Ctx) error {
	raw, ok := bearer(c)
	if !ok {
		return errUnauthorized
	}
	id, err := t.userID(raw)
	if err != nil {
		return err
	}
	c.Locals(localUserID, id)
	return c.Next()
}

func shopperID(c *fiber.Ctx) int64 {
	id, _ := c.Locals(localUserID).(int64)
	return id
}

// requireAdmin compares the bearer token with the admin token in constant
// time.
func requireAdmin(adminToken string) fiber.Handler {
	want := []byte(adminToken)
	return func(c *fiber.Ctx) error {
		raw, ok := bearer(c)
		if !ok || subtle.ConstantTimeCompare([]byte(raw), want) != 1 {
			return core.E(core.CodeUnauthorized, "admin token required")
		}
		return c.Next()
	}
}
