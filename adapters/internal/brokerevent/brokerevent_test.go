package brokerevent

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// TestNamesAreValidOnEveryBroker: a key prefix becomes a name JetStream,
// subjects, Kafka and RabbitMQ all take (no '.', ':', '*', '>', spaces).
func TestNamesAreValidOnEveryBroker(t *testing.T) {
	for prefix, want := range map[string]string{
		"seckill:":      "seckill_orders",
		"shop.eu:v2 *>": "shop_eu_v2___orders",
		"":              "orders",
	} {
		if got := Name(prefix, "orders"); got != want {
			t.Errorf("Name(%q) = %q, want %q", prefix, got, want)
		}
	}
}

// TestADeadLetterSurvivesTheHeaders: a record written as a payload and
// headers reads back the same.
func TestADeadLetterSurvivesTheHeaders(t *testing.T) {
	d := core.DeadLetter{Body: []byte(`{"id":"1"}`), Reason: "poison: bad json", Queue: "nats", SourceID: "42",
		Attempt: 3, Consumer: "pod-0", At: time.UnixMilli(1700000000123).UTC()}
	h := DeadLetterHeaders(d, nil)
	if _, ok := h["order"]; ok {
		t.Fatal("the body is in the headers too")
	}
	got := DecodeDeadLetter(d.Body, h, nil)
	if string(got.Body) != string(d.Body) || got.Reason != d.Reason || got.SourceID != "42" || got.Attempt != 3 ||
		got.Consumer != "pod-0" || !got.At.Equal(d.At) || got.Queue != "nats" {
		t.Fatalf("read back %+v, want %+v", got, d)
	}
	o := core.Order{ID: 7, VoucherID: 9}
	if e := Headers(o); e[VersionHeader] != Version || e[OrderHeader] != "7" || e[VoucherHeader] != "9" || e[KindHeader] != Reserved {
		t.Fatalf("event headers %v", e)
	}
}

// TestASignedDeadLetterIsSealedAndCheckedOnTheWayBack: with the
// deployment's signer a record's headers are sealed; read back, a record
// published by someone else with a reason of its choosing is
// unauthenticated.
func TestASignedDeadLetterIsSealedAndCheckedOnTheWayBack(t *testing.T) {
	signer := core.NewOrderSigner([]byte("0123456789abcdef0123456789abcdef"), "seckill:")
	o := core.Order{ID: 7, UserID: 8, VoucherID: 9, CreatedAt: time.UnixMilli(1700000000000)}
	body, event := Event(o, signer)
	d := core.DeadLetter{Body: body, Reason: "stock_anomaly: refused", Queue: "rabbitmq", Attempt: 1,
		At: time.UnixMilli(1700000000123).UTC(), Signature: event[SignatureHeader]}
	h := DeadLetterHeaders(d, signer)
	if h["seal"] == "" || h["signature"] != event[SignatureHeader] {
		t.Fatalf("headers %v: want the body's signature and the record's seal", h)
	}
	if got := DecodeDeadLetter(body, h, signer); got.Reason != d.Reason {
		t.Fatalf("read back as %q, want %q", got.Reason, d.Reason)
	}
	forged := map[string]string{"reason": "stock_anomaly: forged", "attempt": "1"}
	if got := DecodeDeadLetter([]byte(`{"id":"9","userId":"1","voucherId":"9"}`), forged, signer); !strings.HasPrefix(got.Reason, "unauthenticated: ") {
		t.Fatalf("a forged record read back as %q, want unauthenticated", got.Reason)
	}
}

// TestAnEventCarriesItsOrdersTrace: an order with a trace has it in the
// W3C header beside the body; one without has no such header.
func TestAnEventCarriesItsOrdersTrace(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	o := core.Order{ID: 1, UserID: 2, VoucherID: 3, CreatedAt: time.UnixMilli(1795941009284), Trace: tp}
	body, h := Event(o, nil)
	if h[TraceHeader] != tp || !strings.Contains(string(body), tp) {
		t.Fatalf("headers %v, body %s: want the trace in both", h, body)
	}
	o.Trace = ""
	if _, h := Event(o, nil); len(h) != 4 {
		t.Fatalf("an order without a trace: headers %v, want the four of every event", h)
	}
}
