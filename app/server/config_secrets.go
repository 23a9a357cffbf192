package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strings"

	"github.com/trustelem/zxcvbn"
)

// loadSecrets makes up the secrets the stand-ins lack, and refuses on real
// servers a missing secret, a JWT secret or admin token (or previous JWT
// secret) that is not 32 random bytes, a documented example, a short or
// patterned webhook or payment secret, and any two of the JWT secret, the
// previous one and the admin token alike.
func (c *Config) loadSecrets(embedded bool) error {
	if embedded {
		if len(c.JWTSecret) == 0 {
			c.JWTSecret = []byte(randomHex(32))
		}
		if c.AdminToken == "" {
			c.AdminToken = randomHex(32)
			c.GeneratedAdminToken = true
		}
	} else {
		// With real servers, a made-up secret would differ on every
		// instance and every restart: refuse instead.
		if len(c.JWTSecret) == 0 {
			return &configError{"SECKILL_JWT_SECRET", "", "required when Redis or MySQL is configured"}
		}
		if c.AdminToken == "" {
			return &configError{"SECKILL_ADMIN_TOKEN", "", "required when Redis or MySQL is configured"}
		}
	}
	if len(c.JWTSecret) < 16 {
		return &configError{"SECKILL_JWT_SECRET", "", "must be at least 16 bytes"}
	}
	if len(c.AdminToken) < 16 {
		return &configError{"SECKILL_ADMIN_TOKEN", "", "must be at least 16 characters"}
	}
	if embedded {
		return nil
	}
	keys := map[string]string{"SECKILL_JWT_SECRET": string(c.JWTSecret), "SECKILL_ADMIN_TOKEN": c.AdminToken,
		"SECKILL_JWT_SECRET_PREVIOUS": string(c.JWTSecretPrevious)}
	for name, v := range keys {
		if err := randomKey(name, v); err != nil {
			return err
		}
	}
	for name, v := range map[string]string{"SECKILL_CODE_WEBHOOK_SECRET": c.CodeWebhookSecret, "SECKILL_PAY_SECRET": c.PaySecret} {
		if err := sharedSecret(name, v); err != nil {
			return err
		}
	}
	switch {
	case string(c.JWTSecret) == c.AdminToken:
		return &configError{"SECKILL_ADMIN_TOKEN", "", "is the same as SECKILL_JWT_SECRET: whoever holds one would hold both (the admin token travels in headers and logs of tools; the JWT secret signs every shopper); choose two random values"}
	case len(c.JWTSecretPrevious) > 0 && string(c.JWTSecretPrevious) == c.AdminToken:
		return &configError{"SECKILL_ADMIN_TOKEN", "", "is the same as SECKILL_JWT_SECRET_PREVIOUS: choose a random value of its own"}
	case string(c.JWTSecretPrevious) == string(c.JWTSecret):
		return &configError{"SECKILL_JWT_SECRET_PREVIOUS", "", "is the same as SECKILL_JWT_SECRET: set it to the secret being replaced, or unset it"}
	}
	return nil
}

// minKeyBits is the least entropy zxcvbn may estimate for the JWT secret
// or the admin token: 32 random bytes estimate at 138 bits or more (the
// least of 2,000 draws in base64, hex far more); supersecretpassword at
// 27, 0123456789abcdef repeated at 16.
const minKeyBits = 128

// randomKey refuses, for name, a value that is not at least 32 random
// bytes, written as hex or base64: a secret a word list finds was cracked
// offline from one shopper's token, and with it any shopper forged.
func randomKey(name, v string) error {
	if v == "" {
		return nil
	}
	if isExampleSecret(v) {
		return &configError{name, "", "is an example value from the README or docs, known to everyone: choose a random one (openssl rand -hex 32)"}
	}
	if keyBytes(v) < 32 {
		return &configError{name, "", "must be at least 32 random bytes, written as hex (64 characters) or base64 (44): openssl rand -hex 32"}
	}
	if bits := math.Log2(zxcvbn.PasswordStrength(v, nil).Guesses); bits < minKeyBits {
		return &configError{name, "", fmt.Sprintf("is not random: it is estimated at %.0f bits of entropy, want %d (a pattern or words a cracker guesses); choose a random one (openssl rand -hex 32)", bits, minKeyBits)}
	}
	return nil
}

// keyBytes is how many bytes v carries as hex or base64 (0: neither).
func keyBytes(v string) int {
	if b, err := hex.DecodeString(v); err == nil {
		return len(b)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(v); err == nil {
			return len(b)
		}
	}
	return 0
}

// sharedSecret refuses, for name, a secret shared with an outside party
// (the SMS gateway, the payment provider) that is short, a documented
// example or a pattern: its form is often the other party's to choose.
func sharedSecret(name, v string) error {
	switch {
	case v == "":
		return nil
	case isExampleSecret(v):
		return &configError{name, "", "is an example value from the README or docs, known to everyone: choose a random one (e.g. openssl rand -hex 32)"}
	case len(v) < 16:
		return &configError{name, "", "must be at least 16 bytes"}
	case distinct(v) < minDistinctSecretBytes:
		return &configError{name, "", fmt.Sprintf("has fewer than %d distinct characters, a pattern anyone guesses: choose a random one (e.g. openssl rand -hex 32)", minDistinctSecretBytes)}
	}
	return nil
}

// halfEmbedded refuses exactly one of the two servers set: such an
// instance joins the real queue and persists its orders into a throw-away
// embedded database (or reserves in a throw-away Redis against the real
// database). The outside review saw one dead-letter 20 of 40 real orders.
func halfEmbedded(c Config) error {
	switch {
	case c.EmbeddedRedis() && !c.EmbeddedSQL():
		return &configError{"SECKILL_REDIS_URL", "", "not set while SECKILL_MYSQL_DSN is: set both (a real deployment) or neither (the embedded stand-ins); " +
			"half embedded, this instance would sell from a throw-away Redis into the real database"}
	case !c.EmbeddedRedis() && c.EmbeddedSQL():
		return &configError{"SECKILL_MYSQL_DSN", "", "not set while SECKILL_REDIS_URL is: set both (a real deployment) or neither (the embedded stand-ins); " +
			"half embedded, this instance would consume the real queue into a throw-away database"}
	}
	return nil
}

// minDistinctSecretBytes: a secret of fewer distinct bytes is a pattern
// (aaaa…, abab…, 1212…), whatever its length.
const minDistinctSecretBytes = 8

// distinct counts the different bytes of s.
func distinct(s string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(s); i++ {
		if !seen[s[i]] {
			seen[s[i]] = true
			n++
		}
	}
	return n
}

// exampleSecrets are the secret values the README and docs show. On real
// servers they are refused: whoever copied one shares it with every
// reader. TestDocumentedSecretsAreRefused keeps this list and the docs in
// step. A blocklist, not an entropy guess: a guess refuses good secrets and
// passes bad ones.
var exampleSecrets = []string{
	"change-me-to-32-random-bytes....",
	"change-me-admin-token",
	"demo-admin-token-0123",
	"sms-gateway-shared-secret",
}

func isExampleSecret(v string) bool {
	if strings.HasPrefix(strings.ToLower(v), "change-me") {
		return true
	}
	for _, e := range exampleSecrets {
		if v == e {
			return true
		}
	}
	return false
}

// isLoopback reports whether host (of host:port) names only this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// credentialsInURL is the userinfo of each URL in a text: user:password@
// or a lone token@ (NATS takes nats://token@host), in a URL of any scheme,
// also in lists (nats://u:p@a,nats://u:p@b) that url.Parse refuses.
var credentialsInURL = regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]*://)([^/@\s,]*)@`)

// passwordInQuery is a password given as a URL's query parameter (go-redis
// takes a Sentinel deployment's master password so: ?password=).
var passwordInQuery = regexp.MustCompile(`(?i)([?&](?:sentinel_)?password=)[^&\s,]*`)

// redactURL hides the credentials of every URL in s before it is printed:
// a password becomes xxxxx, a lone token (NATS's) too; the user name
// stays, to tell which account.
func redactURL(s string) string {
	s = passwordInQuery.ReplaceAllString(s, "${1}xxxxx")
	return credentialsInURL.ReplaceAllStringFunc(s, func(m string) string {
		parts := credentialsInURL.FindStringSubmatch(m)
		scheme, userinfo := parts[1], parts[2]
		if user, _, ok := strings.Cut(userinfo, ":"); ok {
			return scheme + user + ":xxxxx@"
		}
		return scheme + "xxxxx@"
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
