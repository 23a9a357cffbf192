package core_test

import (
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

func BenchmarkEncodeDecodeOrder(b *testing.B) {
	o := core.Order{ID: 665485816507662337, UserID: 42, VoucherID: 7, CreatedAt: time.Now()}
	for b.Loop() {
		if _, err := core.DecodeOrder(core.EncodeOrder(o)); err != nil {
			b.Fatal(err)
		}
	}
}
