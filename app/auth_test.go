package main

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestShopperClaims: the lean claims type keeps every check that
// jwt.RegisteredClaims gave: exp required and enforced (with the 5 s
// leeway), nbf enforced, numeric dates as JSON numbers of any form.
func TestShopperClaims(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	tk := newTokens(secret)
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
	issued, err := tk.issue(42, now)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := tk.userID(issued); err != nil || id != 42 {
		t.Fatalf("own token: %d %v", id, err)
	}
}

// BenchmarkTokenUserID: verifying a shopper's token, on every seckill.
func BenchmarkTokenUserID(b *testing.B) {
	tk := newTokens([]byte("0123456789abcdef0123456789abcdef"))
	raw, err := tk.issue(123456789, time.Now())
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
