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
	h := DeadLetterHeaders(d)
	if _, ok := h["order"]; ok {
		t.Fatal("the body is in the headers too")
	}
	got, err := DecodeDeadLetter(d.Body, h)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != string(d.Body) || got.Reason != d.Reason || got.SourceID != "42" || got.Attempt != 3 ||
		got.Consumer != "pod-0" || !got.At.Equal(d.At) || got.Queue != "nats" {
		t.Fatalf("read back %+v, want %+v", got, d)
	}
	o := core.Order{ID: 7, VoucherID: 9}
	if e := Headers(o); e[VersionHeader] != Version || e[OrderHeader] != "7" || e[VoucherHeader] != "9" || e[KindHeader] != Reserved {
		t.Fatalf("event headers %v", e)
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
