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
		"long title":       func(v *core.Voucher) { v.Title = strings.Repeat("x", core.MaxTitleRunes+1) },
		"long wide title":  func(v *core.Voucher) { v.Title = strings.Repeat("券", core.MaxTitleRunes+1) },
		"invalid UTF-8":    func(v *core.Voucher) { v.Title = "half \xff off" },
		"control char":     func(v *core.Voucher) { v.Title = "half\x00off" },
		"newline":          func(v *core.Voucher) { v.Title = "half\noff" },
		"line separator":   func(v *core.Voucher) { v.Title = "half\u2028off" },
		"bidi override":    func(v *core.Voucher) { v.Title = "price \u202e0001\u202c" },
		"bidi isolate":     func(v *core.Voucher) { v.Title = "price \u2067x\u2069" },
		"byte order mark":  func(v *core.Voucher) { v.Title = "\ufefftitle" },
		"pay over actual":  func(v *core.Voucher) { v.PayValue, v.ActualValue = 300, 200 },
		"huge value":       func(v *core.Voucher) { v.PayValue, v.ActualValue = 1, core.MaxValue+1 },
		"year 10000 UTC":   func(v *core.Voucher) { v.EndAt = time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("-01", -3600)) },
		"before 2000":      func(v *core.Voucher) { v.BeginAt = time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC) },
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
	// What a title may hold: any script, emoji with their joiners, and
	// markup (shown as text).
	for _, title := range []string{"半价咖啡券", "👨‍👩‍👧 family pass", "<b>bold</b> & \"quoted\"", "עברית mixed"} {
		v := validVoucher()
		v.Title = title
		if err := v.Validate(); err != nil {
			t.Errorf("title %q refused: %v", title, err)
		}
	}
}

// TestVoucherErrorsNameTheField: an admin reads which field to fix.
func TestVoucherErrorsNameTheField(t *testing.T) {
	for field, mutate := range map[string]func(*core.Voucher){
		"title":       func(v *core.Voucher) { v.Title = "a\u202eb" },
		"payValue":    func(v *core.Voucher) { v.PayValue = -1 },
		"actualValue": func(v *core.Voucher) { v.ActualValue = core.MaxValue + 1 },
		"stock":       func(v *core.Voucher) { v.Stock = -1 },
		"beginTime": func(v *core.Voucher) {
			v.BeginAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
			v.EndAt = v.BeginAt.Add(time.Hour)
		},
		"endTime": func(v *core.Voucher) { v.EndAt = time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("-01", -3600)) },
	} {
		v := validVoucher()
		mutate(&v)
		if msg := core.MessageOf(v.Validate()); !strings.HasPrefix(msg, field) {
			t.Errorf("%s: message %q does not start with the field's name", field, msg)
		}
	}
}
