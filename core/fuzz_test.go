package core_test

import (
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// FuzzDecodeOrder: no message body, however malformed, panics the decoder,
// and whatever it accepts survives a round trip unchanged.
func FuzzDecodeOrder(f *testing.F) {
	f.Add(core.EncodeOrder(core.Order{ID: 665485816507662337, UserID: 1, VoucherID: 2, CreatedAt: time.UnixMilli(1795941009284)}))
	f.Add(core.EncodeOrderCompact(core.Order{ID: 665485816507662337, UserID: 1, VoucherID: 2, CreatedAt: time.UnixMilli(1795941009284)}))
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"id":"1"}`,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":1}`,
		`{"id":"-1","userId":1,"voucherId":1,"createdAt":1}`,
		`{"id":"1","userId":1e30,"voucherId":1,"createdAt":1}`,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":1}garbage`,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":1,"id":"2"}`,
		"{\"id\":\"1\u0000\",\"userId\":1,\"voucherId\":1,\"createdAt\":1}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := core.DecodeOrder(body)
		if err != nil {
			return
		}
		if o.ID <= 0 || o.UserID <= 0 || o.VoucherID <= 0 {
			t.Fatalf("accepted %q as %+v", body, o)
		}
		for _, f := range []core.OrderBody{core.OrderBodyJSON, core.OrderBodyCompact} {
			again, err := core.DecodeOrder(f.Encode(o))
			if err != nil || again != o {
				t.Fatalf("%s round trip of %+v gave %+v, %v", f, o, again, err)
			}
		}
	})
}
