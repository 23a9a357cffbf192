package core_test

import (
	"context"
	"testing"

	"github.com/seckill-lab/seckill/core"
)

// TestOrdersReadBeforeTheLossAreRepairedOnce: a batch read in run-1 and
// persisted after Redis became run-2 (and was rebuilt without it) takes
// its stock and marks its buyers once; a batch read in run-2 changes
// nothing, and neither does repairing again.
func TestOrdersReadBeforeTheLossAreRepairedOnce(t *testing.T) {
	live := newFakeLive("run-2")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 10}}
	r := core.NewRecovery(core.RecoveryConfig{Live: live, Ledger: ledger})
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
	r := core.NewRecovery(core.RecoveryConfig{Live: live, Ledger: ledger})
	batch := []core.Order{{ID: 11, UserID: 1, VoucherID: 7}, {ID: 12, UserID: 2, VoucherID: 7}}
	if err := r.RepairAfter(context.Background(), "run-1", batch); err != nil {
		t.Fatal(err)
	}
	s := live.state[7]
	if _, marked := s.Buyers[2]; marked || s.Buyers[1] != 11 {
		t.Fatalf("buyers after the repair: %v, want the live order's buyer only", s.Buyers)
	}
}
