package redisreserve

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// TestScriptResultCodes: every code the script's header documents maps to
// a result, and an unknown code or reply shape is an error, never a
// success.
func TestScriptResultCodes(t *testing.T) {
	r := &sale{}
	documented := regexp.MustCompile(`(?m)^--   \{(\d), `).FindAllStringSubmatch(lua.Seckill, -1)
	seen := map[int64]bool{}
	for _, m := range documented {
		code, _ := strconv.ParseInt(m[1], 10, 64)
		seen[code] = true
		if _, ok := scriptResults[code]; !ok {
			t.Errorf("the header's code %d maps to no result", code)
		}
	}
	if len(seen) != len(scriptResults) {
		t.Errorf("header documents codes %v, the map has %d", seen, len(scriptResults))
	}
	for code, want := range scriptResults {
		got, err := r.parseReservation([]any{code, "", int64(0)})
		if err != nil || got.Result != want {
			t.Errorf("code %d: %+v %v, want %v", code, got, err, want)
		}
	}
	for name, reply := range map[string][]any{
		"unknown code":   {int64(9), "", int64(0)},
		"negative code":  {int64(-1), "", int64(0)},
		"short reply":    {int64(0), "1"},
		"code as string": {"0", "1", int64(0)},
		"bad order id":   {int64(0), "x", int64(0)},
	} {
		if got, err := r.parseReservation(reply); err == nil {
			t.Errorf("%s: %v parsed as %+v", name, reply, got)
		}
	}
	if got, _ := r.parseReservation([]any{int64(0), "12", int64(0)}); got.Result != core.Reserved || got.OrderID != 12 {
		t.Errorf("a success: %+v", got)
	}
}
