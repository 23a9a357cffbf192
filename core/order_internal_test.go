package core

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// TestEncodeOrderIsTheJSONOfOrderMessage: the hand-written encoder gives
// byte for byte what json.Marshal gives, extremes included.
func TestEncodeOrderIsTheJSONOfOrderMessage(t *testing.T) {
	orders := []Order{
		{ID: 1, UserID: 1, VoucherID: 1, CreatedAt: time.UnixMilli(0)},
		{ID: math.MaxInt64, UserID: math.MaxInt64, VoucherID: math.MaxInt64, CreatedAt: time.UnixMilli(math.MaxInt64 / 2)},
		{ID: -5, UserID: math.MinInt64, VoucherID: 0, CreatedAt: time.UnixMilli(-1)},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		orders = append(orders, Order{ID: r.Int64(), UserID: r.Int64N(1 << 40), VoucherID: r.Int64N(1 << 20),
			CreatedAt: time.UnixMilli(r.Int64N(1 << 42))})
	}
	for i := range orders[3:] {
		if i%2 == 0 {
			orders[3+i].Trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0" + strconv.Itoa(i%2)
		}
	}
	for _, o := range orders {
		want, err := json.Marshal(orderMessage{ID: strconv.FormatInt(o.ID, 10), UserID: o.UserID, VoucherID: o.VoucherID,
			CreatedAt: o.CreatedAt.UnixMilli(), Traceparent: o.Trace})
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeOrder(o); string(got) != string(want) {
			t.Fatalf("EncodeOrder(%+v) = %s, want %s", o, got, want)
		}
	}
}

// FuzzDecodeCanonical: the fast path accepts only what the strict decoder
// accepts, and reads it the same way; EncodeOrder's output always takes it.
func FuzzDecodeCanonical(f *testing.F) {
	f.Add(EncodeOrder(Order{ID: 665485816507662337, UserID: 1, VoucherID: 2, CreatedAt: time.UnixMilli(1795941009284)}))
	for _, seed := range []string{
		`{"id":"1","userId":1,"voucherId":1,"createdAt":1}`,
		`{"id":"01","userId":1,"voucherId":1,"createdAt":1}`,
		`{"id":"1","userId":01,"voucherId":1,"createdAt":1}`,
		`{"id":"+1","userId":1,"voucherId":1,"createdAt":1}`,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":1} `,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":99999999999999999999}`,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":0}`,
		`{"id":"9223372036854775807","userId":9223372036854775807,"voucherId":1,"createdAt":1}`,
		`{"id":"9223372036854775808","userId":1,"voucherId":1,"createdAt":1}`,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":1,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":1,"traceparent":"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}`,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":1,"traceparent":"\u0030\u0030-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		`{"id":"1","userId":1,"voucherId":1,"createdAt":1,"traceparent":""}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := decodeCanonical(body)
		strict, err := decodeStrict(body)
		if ok && (err != nil || fast != strict) {
			t.Fatalf("%q: fast path read %+v, strict decoder %+v, %v", body, fast, strict, err)
		}
		if err == nil {
			if again, ok := decodeCanonical(EncodeOrder(strict)); !ok || again != strict {
				t.Fatalf("EncodeOrder(%+v) misses the fast path: %+v %v", strict, again, ok)
			}
		}
	})
}
