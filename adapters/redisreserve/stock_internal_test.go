package redisreserve

import (
	"errors"
	"testing"

	"github.com/seckill-lab/seckill/core"
)

// TestCountStockTrustsOnlyAPassWithNoUnitBack: the middle pass's count
// stands only when every bucket's returns and generation held from the
// first pass to the last.
func TestCountStockTrustsOnlyAPassWithNoUnitBack(t *testing.T) {
	pass := func(buyers ...int64) []bucketRead {
		out := make([]bucketRead, len(buyers))
		for i, b := range buyers {
			out[i] = bucketRead{stock: 1, buyers: b, units: 30, returns: 2, gen: "g"}
		}
		return out
	}
	with := func(p []bucketRead, b int, f func(*bucketRead)) []bucketRead {
		p = append([]bucketRead(nil), p...)
		f(&p[b])
		return p
	}
	for _, c := range []struct {
		name                string
		first, middle, last []bucketRead
		want                int64
		err                 error
	}{
		{"buyers only grew", pass(1, 2, 3), pass(2, 4, 3), pass(5, 4, 3), 30 - 9, nil},
		{"a unit came back in one bucket while another sold", pass(1, 2, 3), pass(1, 2, 3),
			with(pass(2, 2, 2), 2, func(r *bucketRead) { r.returns = 3 }), 0, errStockUnsettled},
		{"a unit came back before the middle pass while another sold", pass(1, 2, 3),
			with(pass(1, 2, 2), 2, func(r *bucketRead) { r.returns = 3 }),
			with(pass(1, 3, 2), 2, func(r *bucketRead) { r.returns = 3 }), 0, errStockUnsettled},
		{"units came back and none sold", pass(1, 2, 3),
			with(pass(1, 2, 2), 2, func(r *bucketRead) { r.returns = 3 }),
			with(with(pass(0, 2, 2), 2, func(r *bucketRead) { r.returns = 3 }), 0, func(r *bucketRead) { r.returns = 3 }),
			30 - 5, nil},
		{"a unit came back and was bought again in its bucket", pass(1, 2, 3), pass(1, 2, 3),
			with(pass(1, 2, 3), 2, func(r *bucketRead) { r.returns = 3 }), 0, errStockUnsettled},
		{"a rebuild ran", pass(1, 2, 3), pass(1, 2, 3),
			with(pass(1, 2, 3), 0, func(r *bucketRead) { r.gen = "h" }), 0, errStockUnsettled},
		{"a window without units", pass(1, 2, 3),
			with(pass(1, 2, 3), 1, func(r *bucketRead) { r.units = -1 }), pass(1, 2, 3), 0, errNoUnits},
		{"windows that disagree on the units", pass(1, 2, 3),
			with(pass(1, 2, 3), 1, func(r *bucketRead) { r.units = 31 }), pass(1, 2, 3), 0, errNoUnits},
		{"more buyers than units", pass(10, 10, 10), pass(10, 11, 10), pass(10, 11, 10), 0, errNoUnits},
		{"a bucket not loaded", pass(1, 2, 3), pass(1, 2, 3),
			with(pass(1, 2, 3), 1, func(r *bucketRead) { r.stock = -1 }), 0, core.ErrVoucherNotFound},
	} {
		got, err := countStock(c.first, c.middle, c.last)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, got, err, c.want, c.err)
		}
	}
}
