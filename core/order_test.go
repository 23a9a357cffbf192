package core_test

import (
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

func TestOrderMessageRoundTrip(t *testing.T) {
	o := core.Order{ID: 1<<62 + 12345, UserID: 7, VoucherID: 9, CreatedAt: time.UnixMilli(1795941009284).UTC()}
	for _, f := range []core.OrderBody{core.OrderBodyJSON, core.OrderBodyCompact, ""} {
		got, err := core.DecodeOrder(f.Encode(o))
		if err != nil {
			t.Fatalf("%q: %v", f, err)
		}
		if got != o {
			t.Fatalf("%q: round trip gave %+v, want %+v", f, got, o)
		}
	}
}

// TestAnOrdersTraceRidesInItsBody: an order's traceparent goes through
// both bodies and back; one that is not a W3C traceparent is dropped and
// the order read all the same; a body without one (an older producer's)
// reads as an order without a trace.
func TestAnOrdersTraceRidesInItsBody(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	o := core.Order{ID: 665485816507662337, UserID: 1001, VoucherID: 7, CreatedAt: time.UnixMilli(1795941009284).UTC(), Trace: tp}
	for _, f := range []core.OrderBody{core.OrderBodyJSON, core.OrderBodyCompact} {
		if got, err := core.DecodeOrder(f.Encode(o)); err != nil || got != o {
			t.Fatalf("%s: %+v %v, want %+v", f, got, err, o)
		}
	}
	if o.TraceID() != "4bf92f3577b34da6a3ce929d0e0e4736" || (core.Order{}).TraceID() != "" {
		t.Fatalf("trace ids %q and %q", o.TraceID(), (core.Order{}).TraceID())
	}
	if got := string(core.OrderBodyCompact.Encode(o)); got != "2:665485816507662337:1001:7:1795941009284:"+tp {
		t.Fatalf("compact body %q", got)
	}
	for _, body := range []string{
		`{"id":"665485816507662337","userId":1001,"voucherId":7,"createdAt":1795941009284,"traceparent":"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		`{"id":"665485816507662337","userId":1001,"voucherId":7,"createdAt":1795941009284,"traceparent":"not a trace"}`,
		"2:665485816507662337:1001:7:1795941009284",
	} {
		got, err := core.DecodeOrder([]byte(body))
		if want := (core.Order{ID: o.ID, UserID: o.UserID, VoucherID: o.VoucherID, CreatedAt: o.CreatedAt}); err != nil || got != want {
			t.Fatalf("%s: %+v %v, want the order without a trace", body, got, err)
		}
	}
	for _, body := range []string{"2:665485816507662337:1001:7:1795941009284:" + tp + ":1", "2:665485816507662337:1001:7:1795941009284:00-XYZ"} {
		if _, err := core.DecodeOrder([]byte(body)); err == nil {
			t.Fatalf("%s was read: a compact body's fifth field is a traceparent or nothing", body)
		}
	}
}

// TestTheCompactBodyIsVersionTwo: the compact body is the documented one,
// about half the JSON's length, and the zero format writes the JSON
// that readers before the compact one understand.
func TestTheCompactBodyIsVersionTwo(t *testing.T) {
	o := core.Order{ID: 665485816507662337, UserID: 1001, VoucherID: 7, CreatedAt: time.UnixMilli(1795941009284)}
	compact, json := core.OrderBodyCompact.Encode(o), core.OrderBody("").Encode(o)
	if want := "2:665485816507662337:1001:7:1795941009284"; string(compact) != want {
		t.Fatalf("compact body %q, want %q", compact, want)
	}
	if string(json) != string(core.EncodeOrder(o)) || json[0] != '{' {
		t.Fatalf("the zero format wrote %q, want the JSON", json)
	}
	if 20*len(compact) > 11*len(json) {
		t.Errorf("compact %d bytes against the JSON's %d: not about half", len(compact), len(json))
	}
	for _, name := range []string{"json", "compact"} {
		if f, err := core.ParseOrderBody(name); err != nil || string(f) != name {
			t.Errorf("ParseOrderBody(%q) = %q, %v", name, f, err)
		}
	}
	if _, err := core.ParseOrderBody("binary"); err == nil {
		t.Error("ParseOrderBody accepted an unknown format")
	}
}

func TestDecodeOrderRejectsMalformedMessages(t *testing.T) {
	for name, body := range map[string]string{
		"empty":                ``,
		"not json":             `order 1`,
		"unknown field":        `{"id":"1","userId":1,"voucherId":1,"createdAt":1,"x":1}`,
		"trailing data":        `{"id":"1","userId":1,"voucherId":1,"createdAt":1} {}`,
		"numeric id":           `{"id":1,"userId":1,"voucherId":1,"createdAt":1}`,
		"zero id":              `{"id":"0","userId":1,"voucherId":1,"createdAt":1}`,
		"negative user":        `{"id":"1","userId":-1,"voucherId":1,"createdAt":1}`,
		"missing voucher":      `{"id":"1","userId":1,"createdAt":1}`,
		"missing time":         `{"id":"1","userId":1,"voucherId":1}`,
		"id overflow":          `{"id":"99999999999999999999","userId":1,"voucherId":1,"createdAt":1}`,
		"compact empty":        `2:`,
		"compact short":        `2:1:1:1`,
		"compact long":         `2:1:1:1:1:1`,
		"compact trailing":     `2:1:1:1:1 `,
		"compact zero":         `2:0:1:1:1`,
		"compact sign":         `2:1:-1:1:1`,
		"compact leading zero": `2:01:1:1:1`,
		"compact overflow":     `2:99999999999999999999:1:1:1`,
		"compact spaces":       `2: 1:1:1:1`,
		"unknown version":      `3:1:1:1:1`,
	} {
		if _, err := core.DecodeOrder([]byte(body)); err == nil {
			t.Errorf("%s: %q decoded without error", name, body)
		}
	}
}
