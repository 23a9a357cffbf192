package core_test

import (
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

func TestDeadLetterRoundTrip(t *testing.T) {
	d := core.DeadLetter{Body: []byte("{not json"), Reason: "poison: bad", Queue: "streamgroup",
		SourceID: "1-2", Attempt: 3, Consumer: "c-0", At: time.UnixMilli(1795941009284).UTC()}
	got, err := core.DecodeDeadLetter(d.FieldMap())
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != string(d.Body) || got.Reason != d.Reason || got.Queue != d.Queue ||
		got.SourceID != d.SourceID || got.Attempt != d.Attempt || got.Consumer != d.Consumer || !got.At.Equal(d.At) {
		t.Fatalf("round trip gave %+v, want %+v", got, d)
	}
	if f := d.Fields(); len(f) != 14 || f[0] != "order" {
		t.Fatalf("fields %v: want seven pairs, the body first under \"order\"", f)
	}
}

func TestDeadLetterDecodeRefusesWhatIsNotARecord(t *testing.T) {
	for name, fields := range map[string]map[string]string{
		"no body":        {"reason": "poison: x"},
		"no reason":      {"order": "{}"},
		"empty reason":   {"order": "{}", "reason": ""},
		"attempt word":   {"order": "{}", "reason": "poison: x", "attempt": "three"},
		"negative count": {"order": "{}", "reason": "poison: x", "attempt": "-1"},
		"at not a time":  {"order": "{}", "reason": "poison: x", "at": "yesterday"},
	} {
		if d, err := core.DecodeDeadLetter(fields); err == nil {
			t.Errorf("%s: decoded as %+v", name, d)
		}
	}
	// A record written before queue and at existed still reads.
	if _, err := core.DecodeDeadLetter(map[string]string{"order": "{}", "reason": "poison: x", "source_id": "1-1", "attempt": "1"}); err != nil {
		t.Errorf("an older record: %v", err)
	}
}
