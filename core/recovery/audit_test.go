package recovery_test

import (
	"context"
	"strings"
	"testing"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
)

// TestAuditNamesEachDifferenceAndChangesNothing: a live state with the
// wrong stock, a buyer missing and one nobody knows is reported line by
// line, against the stock column minus the held orders not yet persisted;
// the live state is left as it was.
func TestAuditNamesEachDifferenceAndChangesNothing(t *testing.T) {
	live := newFakeLive("run-1")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 7}, // 10 at first, 3 persisted
		orders: []core.Order{{ID: 1, UserID: 1}, {ID: 2, UserID: 2}, {ID: 3, UserID: 3}}}
	held := fakeHolder{{ID: 4, UserID: 4, VoucherID: 7}} // reserved, not yet persisted
	live.state[7] = recovery.LiveState{Present: true, Stock: 9, VerifiedIn: "run-1",
		Buyers: map[int64]int64{1: 1, 2: 2, 4: 4, 99: 99}} // 3 missing, 99 unknown
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger, Queue: core.Capabilities{Holder: held}})
	a, err := r.Audit(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if a.ExpectedStock != 6 || a.HeldUnpersisted != 1 || a.DatabaseOrders != 3 || !a.QueueHolds {
		t.Fatalf("audit %+v: want expected stock 6 (7 minus 1 held), 1 held unpersisted, 3 persisted", a)
	}
	all := strings.Join(a.Differences, "\n")
	for _, want := range []string{"stock: live 9, expected 6", "buyers: 1 in the database or the queue are unknown", "buyers: 1 known to the live store are in neither"} {
		if !strings.Contains(all, want) {
			t.Errorf("differences %q lack %q", all, want)
		}
	}
	if s := live.state[7]; s.Stock != 9 || len(s.Buyers) != 4 || live.restores.Load() != 0 {
		t.Fatalf("the audit changed the live state: %+v, %d restores", s, live.restores.Load())
	}
	// In agreement, an audit has nothing to say.
	live.state[7] = recovery.LiveState{Present: true, Stock: 6, VerifiedIn: "run-1", Buyers: map[int64]int64{1: 1, 2: 2, 3: 3, 4: 4}}
	if a, _ := r.Audit(context.Background(), 7); len(a.Differences) != 0 {
		t.Fatalf("a live state in agreement: differences %v", a.Differences)
	}
	if _, err := r.Audit(context.Background(), 99); err == nil {
		t.Fatal("an audit of a voucher the database lacks succeeded")
	}
}
