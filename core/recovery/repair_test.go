package recovery_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
)

// TestOrdersReadBeforeTheLossAreRepairedOnce: a batch read in run-1 and
// persisted after Redis became run-2 (and was rebuilt without it) takes
// its stock and marks its buyers once; a batch read in run-2 changes
// nothing, and neither does repairing again.
func TestOrdersReadBeforeTheLossAreRepairedOnce(t *testing.T) {
	live := newFakeLive("run-2")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 10}}
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger})
	batch := []core.Order{{ID: 11, UserID: 1, VoucherID: 7}, {ID: 12, UserID: 2, VoucherID: 7}}
	if err := r.RepairAfter(context.Background(), "run-2", batch); err != nil {
		t.Fatal(err)
	}
	if live.state[7].Present {
		t.Fatal("a batch read in the current incarnation touched the live store")
	}
	if err := r.RepairAfter(context.Background(), "run-1", batch); err != nil {
		t.Fatal(err)
	}
	if s := live.state[7]; s.Stock != 8 || s.Buyers[1] != 11 || s.Buyers[2] != 12 {
		t.Fatalf("after the repair: %+v, want stock 8 (rebuilt 10, minus 2) and both buyers", s)
	}
	if err := r.RepairAfter(context.Background(), "run-1", batch); err != nil {
		t.Fatal(err)
	}
	if s := live.state[7]; s.Stock != 8 {
		t.Fatalf("a second repair took the stock again: %d", s.Stock)
	}
}

// TestAnOrderCancelledSinceIsNotRepaired: of a batch read before the loss,
// one order was cancelled (it expired while its message waited for the
// ack) and its unit given back. The repair takes the live one's stock and
// leaves the cancelled one's on sale, its buyer free to buy again.
func TestAnOrderCancelledSinceIsNotRepaired(t *testing.T) {
	live := newFakeLive("run-2")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 10}, orders: []core.Order{
		{ID: 11, UserID: 1, VoucherID: 7, Status: core.StatusCreated},
		{ID: 12, UserID: 2, VoucherID: 7, Status: core.StatusCancelled},
	}}
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger})
	batch := []core.Order{{ID: 11, UserID: 1, VoucherID: 7}, {ID: 12, UserID: 2, VoucherID: 7}}
	if err := r.RepairAfter(context.Background(), "run-1", batch); err != nil {
		t.Fatal(err)
	}
	s := live.state[7]
	if _, marked := s.Buyers[2]; marked || s.Buyers[1] != 11 {
		t.Fatalf("buyers after the repair: %v, want the live order's buyer only", s.Buyers)
	}
}

// partlyReachableLive is a live store whose incarnation cannot be read
// whole (a cluster master out of reach) and whose masters in reach vouch,
// or not, that nothing changed for a batch's orders since it was read.
type partlyReachableLive struct {
	*fakeLive
	unaffected bool
	asked      []string // the readIn of each question
}

func (l *partlyReachableLive) RefreshIncarnation(context.Context) (string, error) {
	return "", errors.New("127.0.0.1:7001: connection refused")
}

func (l *partlyReachableLive) Features() recovery.LiveFeatures {
	return recovery.LiveFeatures{Scoped: l}
}

func (l *partlyReachableLive) Unaffected(_ context.Context, readIn string, _ []core.Order) (bool, error) {
	l.asked = append(l.asked, readIn)
	return l.unaffected, nil
}

// TestARepairWithAMasterOutOfReachAsksTheOrdersOwnMasters: while the
// incarnation cannot be read whole, a batch its own masters vouch for is
// acked without a repair; one they cannot vouch for waits (an error, tried
// again by the pipeline), touching nothing.
func TestARepairWithAMasterOutOfReachAsksTheOrdersOwnMasters(t *testing.T) {
	live := &partlyReachableLive{fakeLive: newFakeLive("run-1"), unaffected: true}
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 10}}
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger})
	batch := []core.Order{{ID: 11, UserID: 1, VoucherID: 7}}
	if err := r.RepairAfter(context.Background(), "run-1", batch); err != nil {
		t.Fatalf("orders their masters vouch for: %v, want no repair and no error", err)
	}
	if len(live.asked) != 1 || live.asked[0] != "run-1" {
		t.Fatalf("asked %v, want the batch's incarnation once", live.asked)
	}
	live.unaffected = false
	err := r.RepairAfter(context.Background(), "run-1", batch)
	if err == nil || core.CodeOf(err) != core.CodeUnavailable {
		t.Fatalf("orders their masters cannot vouch for: %v, want unavailable (tried again)", err)
	}
	if live.state[7].Present {
		t.Fatal("a repair that could not tell the incarnation touched the live store")
	}
}
