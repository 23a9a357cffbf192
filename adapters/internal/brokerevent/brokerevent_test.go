package brokerevent

import (
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
