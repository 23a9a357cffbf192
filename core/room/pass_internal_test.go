package room

import (
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// TestAPassIsItsShoppersOnItsVoucherUntilItLapses: a pass checks only for
// the shopper and voucher it was issued to, before it lapses, with the
// server's key; any change to it is refused.
func TestAPassIsItsShoppersOnItsVoucherUntilItLapses(t *testing.T) {
	s := NewPassSigner([]byte("secret-0123456789"))
	now := time.Now()
	p := Pass{VoucherID: 7, UserID: 42, Position: 3, Expires: now.Add(time.Minute).Truncate(time.Millisecond)}
	tok := s.Token(p)
	if got, err := s.Check(tok, 7, 42, now); err != nil || got != p {
		t.Fatalf("Check = %+v, %v; want %+v", got, err, p)
	}
	refused := map[string]func() error{
		"another shopper":   func() error { _, err := s.Check(tok, 7, 43, now); return err },
		"another voucher":   func() error { _, err := s.Check(tok, 8, 42, now); return err },
		"lapsed":            func() error { _, err := s.Check(tok, 7, 42, now.Add(time.Minute)); return err },
		"another key":       func() error { _, err := NewPassSigner([]byte("other-secret")).Check(tok, 7, 42, now); return err },
		"empty":             func() error { _, err := s.Check("", 7, 42, now); return err },
		"position changed":  func() error { _, err := s.Check(strings.Replace(tok, ".3.", ".1.", 1), 7, 42, now); return err },
		"signature cut":     func() error { _, err := s.Check(tok[:len(tok)-2], 7, 42, now); return err },
		"garbage":           func() error { _, err := s.Check("a.b.c.d.e", 7, 42, now); return err },
		"a login-style JWT": func() error { _, err := s.Check("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI0MiJ9.sig", 7, 42, now); return err },
	}
	for name, check := range refused {
		if err := check(); core.CodeOf(err) != core.CodeNotAdmitted {
			t.Errorf("%s: %v, want not_admitted", name, err)
		}
	}
}

// TestADrawKeyIsTheHMACOfTheUserIDAndTheCommitmentTheSeedsHash, with
// values computed independently (openssl):
//
//	printf 42 | openssl dgst -sha256 -mac HMAC -macopt hexkey:<seed>
func TestADrawKeyIsTheHMACOfTheUserIDAndTheCommitmentTheSeedsHash(t *testing.T) {
	var r core.Room
	for i := range r.Seed {
		r.Seed[i] = byte(i)
	}
	if got, want := r.Commitment(), "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"; got != want {
		t.Errorf("Commitment = %s, want %s", got, want)
	}
	if got, want := DrawKey(r, 42), "7df989924b2ebf8832c80802d1213a8a21a062a23877f0718effe501daee1703"; got != want {
		t.Errorf("DrawKey(42) = %s, want %s", got, want)
	}
}

// TestAPuzzleSolutionIsItsShoppersAndAsHardAsAsked: a solution found by
// counting up joins; the same nonce for another shopper or voucher, a
// lapsed challenge, one of fewer bits, a forged one, or a wrong nonce is
// refused.
func TestAPuzzleSolutionIsItsShoppersAndAsHardAsAsked(t *testing.T) {
	p := NewPuzzle([]byte("secret-0123456789"), 12)
	now := time.Now()
	ch := p.Challenge(7, 42, now)
	nonce := Solve(ch, 12)
	if err := p.Check(ch, nonce, 7, 42, now); err != nil {
		t.Fatalf("the solution is refused: %v", err)
	}
	wrong := nonce + "0"
	for LeadingZeroBits(sha256Sum(ch+":"+wrong)) >= 12 {
		wrong += "0"
	}
	easier := NewPuzzle([]byte("secret-0123456789"), 4)
	easy := easier.Challenge(7, 42, now)
	refused := map[string]error{
		"another shopper":      p.Check(ch, nonce, 7, 43, now),
		"another voucher":      p.Check(ch, nonce, 8, 42, now),
		"lapsed":               p.Check(ch, nonce, 7, 42, now.Add(puzzleLifetime)),
		"a wrong nonce":        p.Check(ch, wrong, 7, 42, now),
		"no nonce":             p.Check(ch, "", 7, 42, now),
		"fewer bits":           p.Check(easy, Solve(easy, 4), 7, 42, now),
		"another server's key": NewPuzzle([]byte("other"), 12).Check(ch, nonce, 7, 42, now),
		"bits edited":          p.Check(strings.Replace(ch, ".12.", ".1.", 1), nonce, 7, 42, now),
	}
	for name, err := range refused {
		if core.CodeOf(err) != core.CodePuzzleRequired {
			t.Errorf("%s: %v, want pow_required", name, err)
		}
	}
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }
