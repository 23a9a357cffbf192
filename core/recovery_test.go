package core_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// fakeLive is a live store in memory.
type fakeLive struct {
	mu          sync.Mutex
	incarnation string
	state       map[int64]core.LiveState
	fences      map[int64]string
	restores    atomic.Int64
}

func newFakeLive(inc string) *fakeLive {
	return &fakeLive{incarnation: inc, state: map[int64]core.LiveState{}, fences: map[int64]string{}}
}

func (l *fakeLive) Incarnation(context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.incarnation, nil
}
func (l *fakeLive) RefreshIncarnation(ctx context.Context) (string, error) { return l.Incarnation(ctx) }

// Repair does what repair_order.lua does.
func (l *fakeLive) Repair(_ context.Context, orders []core.Order) ([]core.Order, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var again []core.Order
	for _, o := range orders {
		s := l.state[o.VoucherID]
		if !s.Present {
			again = append(again, o)
			continue
		}
		if _, known := s.Buyers[o.UserID]; !known {
			s.Buyers[o.UserID] = o.ID
			s.Stock--
		}
		l.state[o.VoucherID] = s
	}
	return again, nil
}

func (l *fakeLive) VerifiedIn(_ context.Context, v int64) (string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state[v]
	return s.VerifiedIn, s.Present, nil
}
func (l *fakeLive) Fence(_ context.Context, v int64, _ time.Duration) (string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fences[v] != "" {
		return "", false, nil
	}
	l.fences[v] = "tok"
	s := l.state[v]
	s.Present = false
	l.state[v] = s
	return "tok", true, nil
}
func (l *fakeLive) Restore(_ context.Context, s core.RestoredSale, token string) error {
	time.Sleep(20 * time.Millisecond) // a rebuild takes a while: concurrent callers must join it
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fences[s.Voucher.ID] != token {
		return errors.New("fence lost")
	}
	delete(l.fences, s.Voucher.ID)
	l.state[s.Voucher.ID] = core.LiveState{Present: true, Stock: s.Voucher.Stock, Buyers: s.Buyers, VerifiedIn: s.Incarnation}
	l.restores.Add(1)
	return nil
}
func (l *fakeLive) Unfence(_ context.Context, v int64, token string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fences[v] == token {
		delete(l.fences, v)
	}
	return nil
}
func (l *fakeLive) Fenced(_ context.Context, v int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fences[v] != "", nil
}
func (l *fakeLive) LiveState(_ context.Context, v int64) (core.LiveState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state[v], nil
}

type fakeLedger struct {
	voucher core.Voucher
	orders  []core.Order
}

func (f fakeLedger) SaleSnapshot(_ context.Context, id int64) (core.Voucher, []core.Order, error) {
	if id != f.voucher.ID {
		return core.Voucher{}, nil, core.ErrVoucherNotFound
	}
	return f.voucher, f.orders, nil
}
func (f fakeLedger) FindVoucher(ctx context.Context, id int64) (core.Voucher, error) {
	v, _, err := f.SaleSnapshot(ctx, id)
	return v, err
}

type fakeHolder []core.Order

func (h fakeHolder) HeldOrders(context.Context, int64) ([]core.Order, error) { return h, nil }

// TestRebuildCountsEveryOrderOnce: orders persisted, orders the queue
// holds, and one that is both (acked between the two reads): the stock
// left is the stock column minus the held orders not yet persisted, and
// every buyer is known.
func TestRebuildCountsEveryOrderOnce(t *testing.T) {
	live := newFakeLive("run-2")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 6}, // 10 at first, 4 persisted
		orders: []core.Order{{ID: 1, UserID: 1}, {ID: 2, UserID: 2}, {ID: 3, UserID: 3}, {ID: 4, UserID: 4}}}
	held := fakeHolder{{ID: 4, UserID: 4, VoucherID: 7}, {ID: 5, UserID: 5, VoucherID: 7}, {ID: 6, UserID: 6, VoucherID: 7}}
	r := core.NewRecovery(live, ledger, held, nil, nil)
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

// TestEnsureRebuildsOncePerIncarnation: a hundred requests at once rebuild
// once; later ones cost no rebuild until the incarnation changes.
func TestEnsureRebuildsOncePerIncarnation(t *testing.T) {
	live := newFakeLive("run-1")
	r := core.NewRecovery(live, fakeLedger{voucher: core.Voucher{ID: 7, Stock: 5}}, nil, nil, nil)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if err := r.Ensure(context.Background(), 7); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := live.restores.Load(); n != 1 {
		t.Fatalf("%d rebuilds for one voucher at once, want 1", n)
	}
	r.Ensure(context.Background(), 7)
	if n := live.restores.Load(); n != 1 {
		t.Fatalf("a verified voucher was rebuilt again (%d)", n)
	}
	live.mu.Lock()
	live.incarnation = "run-2" // Redis came back from an old snapshot
	live.mu.Unlock()
	r.Ensure(context.Background(), 7)
	if n := live.restores.Load(); n != 2 {
		t.Fatalf("a new incarnation did not rebuild (%d rebuilds)", n)
	}
}

// TestAnotherInstancesRebuildIsWaitedFor: while another instance holds the
// fence, a request waits, and is answered busy if it does not end in time.
func TestAnotherInstancesRebuildIsWaitedFor(t *testing.T) {
	live := newFakeLive("run-1")
	live.fences[7] = "someone else's"
	r := core.NewRecovery(live, fakeLedger{voucher: core.Voucher{ID: 7, Stock: 5}}, nil, nil, nil)
	r.Wait = 100 * time.Millisecond
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
	r.Wait = 2 * time.Second
	if err := r.Ensure(context.Background(), 7); err != nil {
		t.Fatalf("the other instance finished: %v", err)
	}
}

// TestOrdersReadBeforeTheLossAreRepairedOnce: a batch read in run-1 and
// persisted after Redis became run-2 (and was rebuilt without it) takes
// its stock and marks its buyers once; a batch read in run-2 changes
// nothing, and neither does repairing again.
func TestOrdersReadBeforeTheLossAreRepairedOnce(t *testing.T) {
	live := newFakeLive("run-2")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 10}}
	r := core.NewRecovery(live, ledger, nil, nil, nil)
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

// TestForgetAllRebuildsEveryVerifiedVoucherOnce: a queue whose stream
// vanished under an unchanged Redis reports it; every voucher verified so
// far is rebuilt before its next use — although its state looks whole and
// its incarnation is the same — once, and then trusted again.
func TestForgetAllRebuildsEveryVerifiedVoucherOnce(t *testing.T) {
	live := newFakeLive("run-1")
	r := core.NewRecovery(live, fakeLedger{voucher: core.Voucher{ID: 7, Stock: 5}}, nil, nil, nil)
	ctx := context.Background()
	if err := r.Ensure(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if n := live.restores.Load(); n != 1 {
		t.Fatalf("%d rebuilds of a voucher first seen, want 1", n)
	}
	r.ForgetAll()
	for range 3 {
		if err := r.Ensure(ctx, 7); err != nil {
			t.Fatal(err)
		}
	}
	if n := live.restores.Load(); n != 2 {
		t.Fatalf("%d rebuilds after ForgetAll and three uses, want 2 (one more)", n)
	}
}
