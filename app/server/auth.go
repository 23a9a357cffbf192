package server

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"hash"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill-lab/seckill/core"
)

var errUnauthorized = core.E(core.CodeUnauthorized, "missing, invalid or expired token")

// Tokens signs and checks shopper JWTs: HS256 only, sub and exp required.
type Tokens struct {
	secret    []byte
	parser    *jwt.Parser
	validator *jwt.Validator
	// header is the first segment of every token issue signs.
	header string
	// lifetime is how long a token is valid (SECKILL_TOKEN_LIFETIME).
	lifetime time.Duration
	// macs are HMAC-SHA256 states keyed with the secret, reused: keying a
	// new one for every token (what SigningMethodHS256.Verify does) was
	// most of the token check's allocations, on every seckill.
	macs sync.Pool
	// older check what earlier secrets signed while the secret rotates
	// (SECKILL_JWT_SECRET_PREVIOUS): none most of the time.
	older []*Tokens
}

// NewTokens checks and signs with secret (SECKILL_JWT_SECRET) tokens valid
// for lifetime (0: DefaultTokenLifetime); the previous secrets
// (SECKILL_JWT_SECRET_PREVIOUS) still check the tokens they signed, and
// sign none.
func NewTokens(secret []byte, lifetime time.Duration, previous ...[]byte) *Tokens {
	t := newTokens(secret, lifetime)
	for _, p := range previous {
		if len(p) > 0 {
			t.older = append(t.older, newTokens(p, lifetime))
		}
	}
	return t
}

func newTokens(secret []byte, lifetime time.Duration) *Tokens {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(5 * time.Second),
	}
	signing, _ := jwt.New(jwt.SigningMethodHS256).SigningString()
	header, _, _ := strings.Cut(signing, ".")
	t := &Tokens{secret: secret, parser: jwt.NewParser(opts...), validator: jwt.NewValidator(opts...), header: header,
		lifetime: cmp.Or(lifetime, DefaultTokenLifetime)}
	t.macs.New = func() any { return hmac.New(sha256.New, secret) }
	return t
}

// signedHere reports whether sig is the HMAC-SHA256 of signingInput with
// the secret, compared in constant time: SigningMethodHS256.Verify's check,
// on a keyed state from the pool.
func (t *Tokens) signedHere(signingInput string, sig []byte) bool {
	mac := t.macs.Get().(hash.Hash)
	defer t.macs.Put(mac)
	mac.Reset()
	io.WriteString(mac, signingInput)
	var sum [sha256.Size]byte
	return hmac.Equal(mac.Sum(sum[:0]), sig)
}

// Issue signs a shopper token for userID, valid for the lifetime from now.
func (t *Tokens) Issue(userID int64, now time.Time) (string, error) {
	return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(userID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(t.lifetime)),
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

// userID verifies a token, signed with the secret or a previous one, and
// returns its subject as a user id.
func (t *Tokens) userID(raw string) (int64, error) {
	id, err := t.userIDSignedHere(raw)
	for _, older := range t.older {
		if err == nil {
			break
		}
		id, err = older.userIDSignedHere(raw)
	}
	return id, err
}

// userIDSignedHere verifies a token signed with this secret.
func (t *Tokens) userIDSignedHere(raw string) (int64, error) {
	switch id, verdict := t.userIDOfOwnForm(raw); verdict {
	case ownFormAccepted:
		return id, nil
	case ownFormForged:
		return 0, errUnauthorized
	}
	var claims shopperClaims
	_, err := t.parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return t.secret, nil })
	if err != nil {
		return 0, errUnauthorized
	}
	return subjectID(claims.Sub)
}

// userIDOfOwnForm accepts a token whose header is byte for byte the one
// issue writes (HS256), and nothing else: anything it does not accept goes
// to golang-jwt's full parser, which gives the verdict. It skips only what
// that header makes needless — decoding the header into a map and looking
// its algorithm up — and leaves the claims to the library's jwt.Validator
// with the parser's options; the signature gets SigningMethodHS256.Verify's
// check on a reused keyed HMAC (signedHere), and only a signature of
// HS256's length is read here. Measured under load, the full parse was the largest
// cost of a seckill request (docs/performance.md); a fuzz test holds this
// path to the library's verdict on every token.
func (t *Tokens) userIDOfOwnForm(raw string) (int64, ownFormVerdict) {
	header, rest, ok := strings.Cut(raw, ".")
	if !ok || header != t.header {
		return 0, notOwnForm
	}
	payload, signature, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, notOwnForm
	}
	var sig [sha256.Size]byte
	if base64.RawURLEncoding.DecodedLen(len(signature)) != len(sig) {
		return 0, notOwnForm
	}
	if _, err := base64.RawURLEncoding.Decode(sig[:], []byte(signature)); err != nil {
		return 0, notOwnForm
	}
	if !t.signedHere(raw[:len(header)+1+len(payload)], sig[:]) {
		// The header names HS256, so the library would check the same
		// signature with the same key: no second HMAC for a forgery.
		return 0, ownFormForged
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return 0, notOwnForm
	}
	var claims shopperClaims
	if !claims.decodeOwnForm(body) && json.Unmarshal(body, &claims) != nil {
		return 0, notOwnForm
	}
	if t.validator.Validate(&claims) != nil {
		return 0, notOwnForm
	}
	id, err := subjectID(claims.Sub)
	if err != nil {
		return 0, notOwnForm
	}
	return id, ownFormAccepted
}

// ownFormVerdict is what userIDOfOwnForm concluded.
type ownFormVerdict int

const (
	notOwnForm      ownFormVerdict = iota // the full parser decides
	ownFormAccepted                       // valid; the id is the user's
	ownFormForged                         // its signature does not verify
)

// decodeOwnForm reads exactly the claims issue writes,
// {"sub":"<digits>","exp":<seconds>,"iat":<seconds>}, as json.Unmarshal
// would, and reports false for anything else (json.Unmarshal then reads
// it). In a loaded server encoding/json's reflection was half the cost of
// the token check; FuzzTokenFastPath holds both readings equal.
func (c *shopperClaims) decodeOwnForm(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, []byte(`{"sub":"`))
	if !ok {
		return false
	}
	n := digitRun(rest)
	if n == 0 {
		return false
	}
	sub := string(rest[:n])
	if rest, ok = bytes.CutPrefix(rest[n:], []byte(`","exp":`)); !ok {
		return false
	}
	exp, rest, ok := seconds(rest)
	if !ok {
		return false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"iat":`)); !ok {
		return false
	}
	if _, rest, ok = seconds(rest); !ok || string(rest) != "}" {
		return false
	}
	c.Sub, c.Exp, c.Nbf = sub, &exp, nil
	return true
}

func digitRun(b []byte) int {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	return n
}

// seconds reads a JSON integer without sign or leading zero, short enough
// (at most 15 digits) that float64 holds it exactly, as encoding/json
// would have read it into a float64.
func seconds(b []byte) (float64, []byte, bool) {
	n := digitRun(b)
	if n == 0 || n > 15 || b[0] == '0' {
		return 0, b, false
	}
	v, err := strconv.ParseInt(string(b[:n]), 10, 64)
	if err != nil {
		return 0, b, false
	}
	return float64(v), b[n:], true
}

// subjectID reads a token's subject as a user id.
func subjectID(sub string) (int64, error) {
	id, err := strconv.ParseInt(sub, 10, 64)
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
func (t *Tokens) requireShopper(c *fiber.Ctx) error {
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
