package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// TestRebuildCountsEveryOrderOnce: orders persisted, orders the queue
// holds, and one that is both (acked between the two reads): the stock
// left is the stock column minus the held orders not yet persisted, and
// every buyer is known.
func TestRebuildCountsEveryOrderOnce(t *testing.T) {
	live := newFakeLive("run-2")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 6}, // 10 at first, 4 persisted
		orders: []core.Order{{ID: 1, UserID: 1}, {ID: 2, UserID: 2}, {ID: 3, UserID: 3}, {ID: 4, UserID: 4}}}
	held := fakeHolder{{ID: 4, UserID: 4, VoucherID: 7}, {ID: 5, UserID: 5, VoucherID: 7}, {ID: 6, UserID: 6, VoucherID: 7}}
	r := core.NewRecovery(core.RecoveryConfig{Live: live, Ledger: ledger, Holder: held})
	if err := r.Ensure(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	s := live.state[7]
	if !s.Present || s.Stock != 4 || len(s.Buyers) != 6 || s.VerifiedIn != "run-2" {
		t.Fatalf("rebuilt %+v, want stock 4 (6 minus held orders 5 and 6), 6 buyers, verified in run-2", s)
	}
	if _, err := r.Reconcile(context.Background(), 99); !errors.Is(err, core.ErrVoucherNotFound) {
		t.Fatalf("a voucher the database lacks: %v, want ErrVoucherNotFound", err)
	}
	if live.fences[99] != "" {
		t.Fatal("a voucher the database lacks was fenced")
	}
}

// TestAnotherInstancesRebuildIsWaitedFor: while another instance holds the
// fence, a request waits, and is answered busy if it does not end in time.
func TestAnotherInstancesRebuildIsWaitedFor(t *testing.T) {
	live := newFakeLive("run-1")
	live.fences[7] = "someone else's"
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 5}}
	r := core.NewRecovery(core.RecoveryConfig{Live: live, Ledger: ledger, Wait: 100 * time.Millisecond})
	if err := r.Ensure(context.Background(), 7); !errors.Is(err, core.ErrBusy) {
		t.Fatalf("with the fence held throughout: %v, want ErrBusy", err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		live.mu.Lock()
		delete(live.fences, 7)
		live.state[7] = core.LiveState{Present: true, Stock: 5, VerifiedIn: "run-1"}
		live.mu.Unlock()
	}()
	r = core.NewRecovery(core.RecoveryConfig{Live: live, Ledger: ledger, Wait: 2 * time.Second})
	if err := r.Ensure(context.Background(), 7); err != nil {
		t.Fatalf("the other instance finished: %v", err)
	}
}
