package recovery_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
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
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger, Queue: core.Capabilities{Holder: held}})
	if err := r.Ensure(context.Background(), 7, core.Wait); err != nil {
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
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger, Wait: 100 * time.Millisecond})
	if err := r.Ensure(context.Background(), 7, core.Wait); !errors.Is(err, core.ErrBusy) {
		t.Fatalf("with the fence held throughout: %v, want ErrBusy", err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		live.mu.Lock()
		delete(live.fences, 7)
		live.state[7] = recovery.LiveState{Present: true, Stock: 5, VerifiedIn: "run-1"}
		live.mu.Unlock()
	}()
	r = recovery.New(recovery.Config{Live: live, Ledger: ledger, Wait: 2 * time.Second})
	if err := r.Ensure(context.Background(), 7, core.Wait); err != nil {
		t.Fatalf("the other instance finished: %v", err)
	}
}

// fakeProbe is a queue that cannot list its orders but tells whether it
// holds any (RabbitMQ's roll call).
type fakeProbe struct {
	mu      sync.Mutex
	holding string
	asked   int
}

func (p *fakeProbe) Holding(context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	return p.holding, nil
}

func (p *fakeProbe) set(holding string) (asked int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = holding
	return p.asked
}

// TestARebuildWaitsForAQueueThatCannotListToDrain: Redis lost the sale
// while the broker still held orders it cannot list. Rebuilding from the
// database alone would sell their units again, so the rebuild keeps the
// voucher closed — a shopper is told busy, an operator not_reconcilable,
// nothing is restored and the fence is lifted for the next try — until the
// broker holds nothing. Then it rebuilds, and records the drain in the
// live store: another instance, and a later rebuild, do not wait again in
// that incarnation; a new incarnation waits again.
func TestARebuildWaitsForAQueueThatCannotListToDrain(t *testing.T) {
	live := newFakeLive("run-2")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 8}, orders: []core.Order{{ID: 1, UserID: 1}, {ID: 2, UserID: 2}}}
	probe := &fakeProbe{holding: "3 ready"}
	// A rebuild's own deadline is half the fence: 3 s, of which 2 s are
	// kept for the rebuild itself, so it waits about 1 s for the drain.
	cfg := recovery.Config{Live: live, Ledger: ledger, Queue: core.Capabilities{Holding: probe}, FenceTTL: 6 * time.Second}
	r := recovery.New(cfg)
	ctx := context.Background()

	err := r.Ensure(ctx, 7, core.Wait)
	if core.CodeOf(err) != core.CodeBusy {
		t.Fatalf("a shopper's rebuild with the broker holding orders: %v, want busy", err)
	}
	if _, err := r.Reconcile(ctx, 7); core.CodeOf(err) != core.CodeNotReconcilable {
		t.Fatalf("an operator's reconcile with the broker holding orders: %v, want not_reconcilable", err)
	}
	if n := live.restores.Load(); n != 0 {
		t.Fatalf("%d restores while the broker held orders, want none", n)
	}
	if fenced, _ := live.Fenced(ctx, 7); fenced {
		t.Fatal("the fence was kept after the rebuild gave up: the next request could not try again")
	}
	if asked := probe.set(""); asked < 2 {
		t.Fatalf("the broker was asked %d times, want at least once per rebuild", asked)
	}

	if err := r.Ensure(ctx, 7, core.Wait); err != nil {
		t.Fatalf("a rebuild once the broker drained: %v", err)
	}
	if s := live.state[7]; !s.Present || s.Stock != 8 || len(s.Buyers) != 2 {
		t.Fatalf("rebuilt %+v, want the database's stock 8 and its 2 buyers", s)
	}
	// New orders flow into the broker again; another instance's reconcile
	// in the same incarnation does not wait for them.
	asked := probe.set("5 ready")
	other := recovery.New(cfg)
	if _, err := other.Reconcile(ctx, 7); err != nil {
		t.Fatalf("another instance's reconcile in the drained incarnation: %v", err)
	}
	if again := probe.set("5 ready"); again != asked {
		t.Fatalf("the broker was asked again (%d times, was %d) in an incarnation already drained", again, asked)
	}

	live.mu.Lock()
	live.incarnation = "run-3" // Redis lost again
	live.mu.Unlock()
	if err := r.Ensure(ctx, 7, core.Wait); core.CodeOf(err) != core.CodeBusy {
		t.Fatalf("a rebuild in a new incarnation with the broker holding orders: %v, want busy", err)
	}
}
