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
	for _, o := range orders {
		want, err := json.Marshal(orderMessage{ID: strconv.FormatInt(o.ID, 10), UserID: o.UserID, VoucherID: o.VoucherID,
			CreatedAt: o.CreatedAt.UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeOrder(o); string(got) != string(want) {
			t.Fatalf("EncodeOrder(%+v) = %s, want %s", o, got, want)
		}
	}
}
