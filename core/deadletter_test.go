package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

func TestDeadLetterRoundTrip(t *testing.T) {
	d := core.DeadLetter{Body: []byte("{not json"), Reason: "poison: bad", Queue: "streamgroup",
		SourceID: "1-2", Attempt: 3, Consumer: "c-0", At: time.UnixMilli(1795941009284).UTC()}
	got := core.DecodeDeadLetter(d.FieldMap())
	if string(got.Body) != string(d.Body) || got.Reason != d.Reason || got.Queue != d.Queue ||
		got.SourceID != d.SourceID || got.Attempt != d.Attempt || got.Consumer != d.Consumer || !got.At.Equal(d.At) {
		t.Fatalf("round trip gave %+v, want %+v", got, d)
	}
	if f := d.Fields(); len(f) != 14 || f[0] != "order" {
		t.Fatalf("fields %v: want seven pairs, the body first under \"order\"", f)
	}
	d.Signature, d.Seal = "ab", "cd"
	if got := core.DecodeDeadLetter(d.FieldMap()); got.Signature != "ab" || got.Seal != "cd" {
		t.Fatalf("signature and seal read back as %q %q", got.Signature, got.Seal)
	}
}

// TestADeadLetterThatDoesNotReadWholeIsPoison: the review's record with
// header attempt=abc stopped the register for good (every later letter
// unlisted). A record that does not read whole is kept, as poison saying
// what was wrong, never an error that stops its reader.
func TestADeadLetterThatDoesNotReadWholeIsPoison(t *testing.T) {
	for name, fields := range map[string]map[string]string{
		"no body":        {"reason": "poison: x"},
		"no reason":      {"order": "{}"},
		"empty reason":   {"order": "{}", "reason": ""},
		"attempt word":   {"order": "{}", "reason": "stock_anomaly: x", "attempt": "abc"},
		"negative count": {"order": "{}", "reason": "poison: x", "attempt": "-1"},
		"at not a time":  {"order": "{}", "reason": "poison: x", "at": "yesterday"},
	} {
		d := core.DecodeDeadLetter(fields)
		if !strings.HasPrefix(d.Reason, "poison: the dead-letter record does not read whole") || d.Attempt < 0 {
			t.Errorf("%s: decoded as %+v, want poison saying why", name, d)
		}
	}
	if d := core.DecodeDeadLetter(map[string]string{"order": "{}", "reason": "stock_anomaly: x", "attempt": "abc"}); !strings.Contains(d.Reason, `attempt "abc" is not a count`) || !strings.Contains(d.Reason, `it said "stock_anomaly: x"`) {
		t.Errorf("the poison's detail: %q", d.Reason)
	}
	// A record written before queue and at existed still reads.
	if d := core.DecodeDeadLetter(map[string]string{"order": "{}", "reason": "max_deliveries: x", "source_id": "1-1", "attempt": "1"}); d.Reason != "max_deliveries: x" || d.Attempt != 1 {
		t.Errorf("an older record: %+v", d)
	}
}

// TestADeadLettersBodyIsCut: a body past the cap is kept cut, and the
// record is poison saying so; every other field is cut too.
func TestADeadLettersBodyIsCut(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	d := core.DecodeDeadLetter(map[string]string{"order": big, "reason": "stock_anomaly: " + big, "consumer": big})
	if len(d.Body) != core.MaxDeadLetterBody || len(d.Reason) > 4<<10 || len(d.Consumer) > 4<<10 {
		t.Fatalf("kept a body of %d, a reason of %d, a consumer of %d bytes", len(d.Body), len(d.Reason), len(d.Consumer))
	}
	if !strings.Contains(d.Reason, "its body of 1048576 bytes is cut at 65536") {
		t.Fatalf("the reason does not say the body was cut: %.200s", d.Reason)
	}
}

// TestOnlyWhatVerifiesIsBelieved: a dead letter read back from an outside
// broker is believed as far as it verifies: a body without the
// deployment's signature is unauthenticated whatever the record says; a
// signed body under headers that are not sealed (written by someone else,
// or by the broker itself) is max_deliveries with no count believed; a
// sealed record is as written.
func TestOnlyWhatVerifiesIsBelieved(t *testing.T) {
	signer := core.NewOrderSigner([]byte("0123456789abcdef0123456789abcdef"), "seckill:")
	body := core.EncodeOrder(core.Order{ID: 5, UserID: 6, VoucherID: 7, CreatedAt: time.UnixMilli(1795941009284)})
	rec := core.DeadLetter{Body: body, Reason: "stock_anomaly: refused", Queue: "rabbitmq", Attempt: 2, Consumer: "pod-1",
		At: time.UnixMilli(1795941009999).UTC(), Signature: signer.Sign(body)}
	read := func(d core.DeadLetter) core.DeadLetter {
		return signer.BelieveDeadLetter(core.DecodeDeadLetter(d.FieldMap()))
	}

	if got := read(signer.SealDeadLetter(rec)); got.Reason != rec.Reason || got.Attempt != 2 || got.Consumer != "pod-1" {
		t.Fatalf("a sealed record read back as %+v", got)
	}
	forged := rec
	forged.Signature = ""
	if got := read(signer.SealDeadLetter(forged)); !strings.HasPrefix(got.Reason, "unauthenticated: ") {
		t.Fatalf("an unsigned body, sealed: %q, want unauthenticated", got.Reason)
	}
	unsealed := rec
	unsealed.Attempt = 99
	if got := read(unsealed); !strings.HasPrefix(got.Reason, "max_deliveries: ") || got.Attempt != 0 {
		t.Fatalf("unsealed headers: %q attempt %d, want max_deliveries with no count", got.Reason, got.Attempt)
	}
	edited := signer.SealDeadLetter(rec)
	edited.Reason = "id_collision: x"
	if got := read(edited); !strings.HasPrefix(got.Reason, "max_deliveries: ") {
		t.Fatalf("an edited reason under the seal: %q, want it disbelieved", got.Reason)
	}
	other := core.NewOrderSigner([]byte("0123456789abcdef0123456789abcdef"), "other:")
	if got := other.BelieveDeadLetter(signer.SealDeadLetter(rec)); !strings.HasPrefix(got.Reason, "unauthenticated: ") {
		t.Fatalf("another deployment's record: %q, want unauthenticated", got.Reason)
	}
}
