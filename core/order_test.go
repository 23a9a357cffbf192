package core_test

import (
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

func TestOrderMessageRoundTrip(t *testing.T) {
	o := core.Order{ID: 1<<62 + 12345, UserID: 7, VoucherID: 9, CreatedAt: time.UnixMilli(1795941009284).UTC()}
	got, err := core.DecodeOrder(core.EncodeOrder(o))
	if err != nil {
		t.Fatal(err)
	}
	if got != o {
		t.Fatalf("round trip gave %+v, want %+v", got, o)
	}
}

func TestDecodeOrderRejectsMalformedMessages(t *testing.T) {
	for name, body := range map[string]string{
		"empty":           ``,
		"not json":        `order 1`,
		"unknown field":   `{"id":"1","userId":1,"voucherId":1,"createdAt":1,"x":1}`,
		"trailing data":   `{"id":"1","userId":1,"voucherId":1,"createdAt":1} {}`,
		"numeric id":      `{"id":1,"userId":1,"voucherId":1,"createdAt":1}`,
		"zero id":         `{"id":"0","userId":1,"voucherId":1,"createdAt":1}`,
		"negative user":   `{"id":"1","userId":-1,"voucherId":1,"createdAt":1}`,
		"missing voucher": `{"id":"1","userId":1,"createdAt":1}`,
		"missing time":    `{"id":"1","userId":1,"voucherId":1}`,
		"id overflow":     `{"id":"99999999999999999999","userId":1,"voucherId":1,"createdAt":1}`,
	} {
		if _, err := core.DecodeOrder([]byte(body)); err == nil {
			t.Errorf("%s: %q decoded without error", name, body)
		}
	}
}
