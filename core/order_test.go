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
