package recovery_test

import (
	"context"
	"testing"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
)

// TestDriftIsTheShortfallSeenTwiceRunning: a voucher whose live stock is
// 3 below what the database and the queue account for counts once two
// audits running found it (one audit alone is a sale in flight); a
// voucher in agreement never counts; the shortfall is gone from the
// report once the live stock agrees again, or the voucher is off sale.
func TestDriftIsTheShortfallSeenTwiceRunning(t *testing.T) {
	live := newFakeLive("run-1")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 10}}
	live.state[7] = recovery.LiveState{Present: true, Stock: 7, VerifiedIn: "run-1", Buyers: map[int64]int64{}}
	g := recovery.New(recovery.Config{Live: live, Ledger: ledger, Queue: core.Capabilities{Holder: fakeHolder{}}})
	onSale := []int64{7}
	var units int64
	var vouchers int
	w := &recovery.DriftWatch{Guard: g, Vouchers: func(context.Context) ([]int64, error) { return onSale, nil },
		Report: func(u int64, v int) { units, vouchers = u, v }}
	ctx := context.Background()
	check := func(wantUnits int64, wantVouchers int, when string) {
		t.Helper()
		if err := w.Check(ctx); err != nil {
			t.Fatal(err)
		}
		if units != wantUnits || vouchers != wantVouchers {
			t.Fatalf("%s: %d units on %d vouchers, want %d on %d", when, units, vouchers, wantUnits, wantVouchers)
		}
	}
	check(0, 0, "one audit")
	check(3, 1, "two audits running")
	live.state[7] = recovery.LiveState{Present: true, Stock: 10, VerifiedIn: "run-1", Buyers: map[int64]int64{}}
	check(0, 0, "in agreement again")
	live.state[7] = recovery.LiveState{Present: true, Stock: 8, VerifiedIn: "run-1", Buyers: map[int64]int64{}}
	check(0, 0, "a new shortfall, once")
	check(2, 1, "the new shortfall, twice")
	onSale = nil
	check(0, 0, "off sale")
}
