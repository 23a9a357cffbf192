package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

func validVoucher() core.Voucher {
	now := time.Now()
	return core.Voucher{Title: "t", PayValue: 1, ActualValue: 2, Stock: 10, BeginAt: now, EndAt: now.Add(time.Hour)}
}

func TestVoucherValidation(t *testing.T) {
	if err := validVoucher().Validate(); err != nil {
		t.Fatalf("valid voucher refused: %v", err)
	}
	for name, mutate := range map[string]func(*core.Voucher){
		"no title":         func(v *core.Voucher) { v.Title = " " },
		"long title":       func(v *core.Voucher) { v.Title = strings.Repeat("x", 256) },
		"negative pay":     func(v *core.Voucher) { v.PayValue = -1 },
		"zero stock":       func(v *core.Voucher) { v.Stock = 0 },
		"huge stock":       func(v *core.Voucher) { v.Stock = core.MaxStock + 1 },
		"no begin":         func(v *core.Voucher) { v.BeginAt = time.Time{} },
		"end before begin": func(v *core.Voucher) { v.EndAt = v.BeginAt.Add(-time.Second) },
		"end equals begin": func(v *core.Voucher) { v.EndAt = v.BeginAt },
	} {
		v := validVoucher()
		mutate(&v)
		if err := v.Validate(); core.CodeOf(err) != core.CodeBadRequest {
			t.Errorf("%s: err = %v, want bad_request", name, err)
		}
	}
}
