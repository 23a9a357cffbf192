package core_test

import (
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

func BenchmarkEncodeDecodeOrder(b *testing.B) {
	o := core.Order{ID: 665485816507662337, UserID: 42, VoucherID: 7, CreatedAt: time.Now()}
	for _, f := range []core.OrderBody{core.OrderBodyJSON, core.OrderBodyCompact} {
		b.Run(string(f), func(b *testing.B) {
			for b.Loop() {
				if _, err := core.DecodeOrder(f.Encode(o)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
