package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

// TestShopperClaims: the lean claims type keeps every check that
// jwt.RegisteredClaims gave: exp required and enforced (with the 5 s
// leeway), nbf enforced, numeric dates as JSON numbers of any form.
func TestShopperClaims(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	tk := NewTokens(secret, 0)
	now := time.Now()
	sign := func(claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		name   string
		claims jwt.MapClaims
		ok     bool
	}{
		{"valid", jwt.MapClaims{"sub": "42", "exp": now.Add(time.Hour).Unix()}, true},
		{"fractional exp", jwt.MapClaims{"sub": "42", "exp": float64(now.Add(time.Hour).Unix()) + 0.5}, true},
		{"expired within the leeway", jwt.MapClaims{"sub": "42", "exp": now.Add(-2 * time.Second).Unix()}, true},
		{"expired", jwt.MapClaims{"sub": "42", "exp": now.Add(-time.Minute).Unix()}, false},
		{"no exp", jwt.MapClaims{"sub": "42"}, false},
		{"exp a string", jwt.MapClaims{"sub": "42", "exp": "tomorrow"}, false},
		{"not yet valid", jwt.MapClaims{"sub": "42", "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(time.Minute).Unix()}, false},
		{"valid since", jwt.MapClaims{"sub": "42", "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(-time.Minute).Unix()}, true},
		{"sub a number", jwt.MapClaims{"sub": 42, "exp": now.Add(time.Hour).Unix()}, false},
		{"sub zero", jwt.MapClaims{"sub": "0", "exp": now.Add(time.Hour).Unix()}, false},
	} {
		id, err := tk.userID(sign(c.claims))
		if ok := err == nil && id == 42; ok != c.ok {
			t.Errorf("%s: user %d, err %v; want accepted: %v", c.name, id, err, c.ok)
		}
	}
	issued, err := tk.Issue(42, now)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := tk.userID(issued); err != nil || id != 42 {
		t.Fatalf("own token: %d %v", id, err)
	}
}

// TestTokensOfAnotherSecretAreRefusedWhileTheMACsAreShared: the keyed
// HMAC states are reused across goroutines; under load, a token signed
// with another secret, or whose signature was altered, is never
// accepted, and every genuine one is, with its own user.
func TestTokensOfAnotherSecretAreRefusedWhileTheMACsAreShared(t *testing.T) {
	tk := NewTokens([]byte("0123456789abcdef0123456789abcdef"), 0)
	other := NewTokens([]byte("fedcba9876543210fedcba9876543210"), 0)
	now := time.Now()
	done := make(chan error, 8)
	for g := int64(1); g <= 8; g++ {
		go func() {
			for i := int64(0); i < 200; i++ {
				user := g*1000 + i
				good, _ := tk.Issue(user, now)
				forged, _ := other.Issue(user, now)
				// A character inside the signature (the last one also
				// carries padding bits that decode to nothing).
				at := len(good) - 10
				altered := good[:at] + map[bool]string{true: "A", false: "B"}[good[at] != 'A'] + good[at+1:]
				if id, err := tk.userID(good); err != nil || id != user {
					done <- fmt.Errorf("genuine token of %d: %d, %v", user, id, err)
					return
				}
				for _, bad := range []string{forged, altered} {
					if id, err := tk.userID(bad); err == nil {
						done <- fmt.Errorf("token %q accepted as user %d", bad, id)
						return
					}
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkTokenUserID: verifying a shopper's token, on every seckill.
func BenchmarkTokenUserID(b *testing.B) {
	tk := NewTokens([]byte("0123456789abcdef0123456789abcdef"), 0)
	raw, err := tk.Issue(123456789, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if id, err := tk.userID(raw); err != nil || id != 123456789 {
			b.Fatal(id, err)
		}
	}
}

// FuzzTokenFastPath: the fast path for tokens of the server's own form
// accepts nothing golang-jwt's full parser refuses, and reads the same
// user, and refuses as forged nothing the parser accepts; so userID gives
// the library's verdict on every token. The fuzzer
// writes the claims (and sometimes the header); the test signs them with
// the real secret, so the accepting branches are reached, not only the
// signature check.
func FuzzTokenFastPath(f *testing.F) {
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	for _, seed := range []struct{ header, claims string }{
		{"", `{"sub":"42","exp":` + exp + `}`},
		{"", `{"sub":"42","exp":` + exp + `,"nbf":1}`},
		{"", `{"sub":"42","exp":` + exp + `.5}`},
		{"", `{"sub":"42","exp":1}`},
		{"", `{"sub":"42"}`},
		{"", `{"SUB":"42","exp":` + exp + `}`},
		{"", `{"sub":"42","sub":"43","exp":` + exp + `}`},
		{"", `{"sub":"0042","exp":` + exp + `}`},
		{"", `{"sub":"42","exp":"` + exp + `"}`},
		{"", `null`},
		{"", `{"sub":"42","exp":` + exp + `,"iat":1}`},
		{"", `{"sub":"0042","exp":` + exp + `,"iat":1}`},
		{"", `{"sub":"42","exp":0` + exp + `,"iat":1}`},
		{"", `{"sub":"42","exp":1234567890123456,"iat":1}`},
		{"", `{"sub":"42","exp":` + exp + `,"iat":-1}`},
		{"", `{"sub":"42","exp":` + exp + `,"iat":1.5}`},
		{"", `{"sub":"","exp":` + exp + `,"iat":1}`},
		{"", `{"sub":"42","exp":` + exp + `,"iat":1} `},
		{"", `{"sub":"42","exp":` + exp + `} `},
		{`{"alg":"HS256","typ":"JWT"}`, `{"sub":"42","exp":` + exp + `}`},
		{`{"alg":"HS256"}`, `{"sub":"42","exp":` + exp + `}`},
		{`{"alg":"none","typ":"JWT"}`, `{"sub":"42","exp":` + exp + `}`},
		{`{"alg":"HS512","typ":"JWT"}`, `{"sub":"42","exp":` + exp + `}`},
	} {
		f.Add(seed.header, []byte(seed.claims), false)
	}
	f.Add("", []byte(`{"sub":"42","exp":`+exp+`}`), true)
	secret := []byte("0123456789abcdef0123456789abcdef")
	tk := NewTokens(secret, 0)
	f.Fuzz(func(t *testing.T, header string, claims []byte, tamper bool) {
		h := tk.header
		if header != "" {
			h = base64.RawURLEncoding.EncodeToString([]byte(header))
		}
		signing := h + "." + base64.RawURLEncoding.EncodeToString(claims)
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(signing))
		sum := mac.Sum(nil)
		if tamper {
			sum[0] ^= 1
		}
		raw := signing + "." + base64.RawURLEncoding.EncodeToString(sum)

		var lib shopperClaims
		libID, libErr := int64(0), error(nil)
		if _, err := tk.parser.ParseWithClaims(raw, &lib, func(*jwt.Token) (any, error) { return secret, nil }); err != nil {
			libErr = err
		} else {
			libID, libErr = subjectID(lib.Sub)
		}
		switch fastID, verdict := tk.userIDOfOwnForm(raw); {
		case verdict == ownFormAccepted && (libErr != nil || fastID != libID):
			t.Fatalf("%q: fast path read user %d; the library: %d, %v", raw, fastID, libID, libErr)
		case verdict == ownFormForged && libErr == nil:
			t.Fatalf("%q: fast path called it forged; the library accepted user %d", raw, libID)
		}
		id, err := tk.userID(raw)
		if (err == nil) != (libErr == nil) || id != libID {
			t.Fatalf("%q: userID %d, %v; the library: %d, %v", raw, id, err, libID, libErr)
		}
	})
}

// TestATokenOfThePreviousSecretIsAcceptedWhileItRotates: with
// SECKILL_JWT_SECRET_PREVIOUS set, a shopper's token the old secret
// signed still logs them in (nobody is logged out by a rotation), a new
// one is signed with the new secret only, and a token of any other secret
// is refused; without it, the old token is refused.
func TestATokenOfThePreviousSecretIsAcceptedWhileItRotates(t *testing.T) {
	old, current := []byte(testenv.Secret()), []byte(testenv.Secret())
	now := time.Now()
	oldToken, _ := NewTokens(old, 0).Issue(7, now)
	otherToken, _ := NewTokens([]byte(testenv.Secret()), 0).Issue(7, now)
	rotating := NewTokens(current, 0, old)
	if id, err := rotating.userID(oldToken); err != nil || id != 7 {
		t.Fatalf("the old secret's token while it rotates: %d %v, want user 7", id, err)
	}
	if _, err := rotating.userID(otherToken); err == nil {
		t.Fatal("another secret's token accepted")
	}
	fresh, _ := rotating.Issue(8, now)
	if id, err := NewTokens(current, 0).userID(fresh); err != nil || id != 8 {
		t.Fatalf("a token issued while rotating, checked with the new secret alone: %d %v", id, err)
	}
	if _, err := NewTokens(current, 0).userID(oldToken); err == nil {
		t.Fatal("without the previous secret, the old one's token is accepted")
	}
}
