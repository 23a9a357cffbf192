package core_test

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/room"
)

// TestEachPurposeSignsWithItsOwnHKDFKey: the security review cracked the
// JWT secret offline, and the same secret keyed the room passes, the
// proof of work and the broker signatures. Each use now signs with
// HKDF-SHA256(secret, its label): a pass's signature is the HMAC under
// that key (computed here apart), and no purpose's signature verifies
// under another's or under the raw secret.
func TestEachPurposeSignsWithItsOwnHKDFKey(t *testing.T) {
	secret := []byte("8a3f0c1e5b7d9e2f4a6c8e0b2d4f6a8c1e3b5d7f9a2c4e6b8d0f2a4c6e8b0d2f")
	pass := room.NewPassSigner(secret).Token(room.Pass{VoucherID: 1, UserID: 2, Position: 3, Expires: time.UnixMilli(1795941009284)})
	cut := strings.LastIndexByte(pass, '.')
	key, _ := hkdf.Key(sha256.New, secret, nil, "seckill room pass v2", 32)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(pass[:cut]))
	if want := base64.RawURLEncoding.EncodeToString(mac.Sum(nil)); pass[cut+1:] != want {
		t.Fatalf("the pass's signature %s, want HMAC under HKDF(secret, \"seckill room pass v2\") %s", pass[cut+1:], want)
	}
	body := []byte(`{"id":"1"}`)
	sig := core.NewOrderSigner(secret, "seckill:").Sign(body)
	for name, k := range map[string][]byte{"the secret itself": secret, "the pass key": key} {
		m := hmac.New(sha256.New, k)
		m.Write(body)
		if hex.EncodeToString(m.Sum(nil)) == sig {
			t.Errorf("a broker message's signature is the HMAC under %s", name)
		}
	}
	if room.NewPassSigner(secret).Token(room.Pass{VoucherID: 1}) == room.NewPassSigner([]byte("another")).Token(room.Pass{VoucherID: 1}) {
		t.Fatal("two secrets sign a pass alike")
	}
}

// TestAPreviousSecretStillVerifiesWhatItSigned: while the secret rotates
// (SECKILL_JWT_SECRET_PREVIOUS), what the old one signed — a pass, a
// broker message, a puzzle — still verifies, what the new one signs
// verifies, and what a third signed does not. What an earlier version
// signed (the HMAC-derived keys before HKDF) verifies too, so an upgrade
// refuses no order on its way through a broker.
func TestAPreviousSecretStillVerifiesWhatItSigned(t *testing.T) {
	old, current, other := []byte(strings.Repeat("a1", 32)), []byte(strings.Repeat("b2", 32)), []byte(strings.Repeat("c3", 32))
	now := time.UnixMilli(1795941009284)
	p := room.Pass{VoucherID: 1, UserID: 2, Position: 3, Expires: now.Add(time.Minute)}
	rotating := room.NewPassSigner(current, old)
	for name, c := range map[string]struct {
		token string
		ok    bool
	}{
		"the old secret's":  {room.NewPassSigner(old).Token(p), true},
		"the new secret's":  {rotating.Token(p), true},
		"a third secret's":  {room.NewPassSigner(other).Token(p), false},
		"signed by the new": {room.NewPassSigner(current).Token(p), true},
	} {
		if _, err := rotating.Check(c.token, 1, 2, now); (err == nil) != c.ok {
			t.Errorf("%s pass: %v, want accepted %v", name, err, c.ok)
		}
	}
	if _, err := room.NewPassSigner(current).Check(room.NewPassSigner(old).Token(p), 1, 2, now); err == nil {
		t.Error("without the previous secret, the old one's pass is accepted")
	}
	body := []byte(`{"id":"9"}`)
	if !core.NewOrderSigner(current, "s:", old).Valid(body, core.NewOrderSigner(old, "s:").Sign(body)) {
		t.Error("a broker message the old secret signed does not verify while it rotates")
	}
	legacy := hmac.New(sha256.New, []byte(old))
	legacy.Write([]byte("seckill order message signature v1\x00s:"))
	v1 := hmac.New(sha256.New, legacy.Sum(nil))
	v1.Write(body)
	if !core.NewOrderSigner(old, "s:").Valid(body, hex.EncodeToString(v1.Sum(nil))) {
		t.Error("a message the previous version signed (its HMAC-derived key) does not verify")
	}
	puzzle := room.NewPuzzle(old, 1)
	challenge := puzzle.Challenge(1, 2, now)
	if err := room.NewPuzzle(current, 1, old).Check(challenge, room.Solve(challenge, 1), 1, 2, now); err != nil {
		t.Errorf("a challenge of the old secret, solved: %v", err)
	}
}
