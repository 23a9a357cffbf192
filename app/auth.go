package main

import (
	"crypto/subtle"
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

// userID verifies a token and returns its subject as a user id.
func (t *tokens) userID(raw string) (int64, error) {
	var claims jwt.RegisteredClaims
	_, err := t.parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return t.secret, nil })
	if err != nil {
		return 0, errUnauthorized
	}
	id, err := strconv.ParseInt(claims.Subject, 10, 64)
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
