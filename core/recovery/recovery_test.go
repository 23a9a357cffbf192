package recovery_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
)

// fakeLive is a live store in memory.
type fakeLive struct {
	mu          sync.Mutex
	incarnation string
	state       map[int64]recovery.LiveState
	fences      map[int64]string
	restores    atomic.Int64
	drainedIn   *string
	// failRestore makes every restore fail, as a Redis out of memory
	// would; attempts counts the restores tried.
	failRestore atomic.Bool
	attempts    atomic.Int64
}

// Features: the fake has no optional part (those that do embed it).
func (l *fakeLive) Features() recovery.LiveFeatures { return recovery.LiveFeatures{} }

func (l *fakeLive) DrainedIn(context.Context) (string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drainedIn == nil {
		return "", false, nil
	}
	return *l.drainedIn, true, nil
}

func (l *fakeLive) MarkDrained(_ context.Context, inc string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drainedIn = &inc
	return nil
}

func newFakeLive(inc string) *fakeLive {
	return &fakeLive{incarnation: inc, state: map[int64]recovery.LiveState{}, fences: map[int64]string{}}
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
func (l *fakeLive) Restore(_ context.Context, s recovery.RestoredSale, token string) error {
	time.Sleep(20 * time.Millisecond) // a rebuild takes a while: concurrent callers must join it
	l.attempts.Add(1)
	if l.failRestore.Load() {
		return errors.New("OOM command not allowed when used memory > 'maxmemory'")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fences[s.Voucher.ID] != token {
		return errors.New("fence lost")
	}
	delete(l.fences, s.Voucher.ID)
	l.state[s.Voucher.ID] = recovery.LiveState{Present: true, Stock: s.Voucher.Stock, Buyers: s.Buyers, VerifiedIn: s.Incarnation}
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
func (l *fakeLive) LiveState(_ context.Context, v int64) (recovery.LiveState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state[v], nil
}

type fakeLedger struct {
	voucher core.Voucher
	orders  []core.Order
	// lettered are the open dead letters' orders holding a unit.
	lettered []core.Order
}

// SaleSnapshot is the database's: the live orders only, and the statuses
// of those asked of.
func (f fakeLedger) SaleSnapshot(ctx context.Context, id int64, also []int64) (core.Voucher, []core.Order, map[int64]core.OrderStatus, error) {
	if id != f.voucher.ID {
		return core.Voucher{}, nil, nil, core.ErrVoucherNotFound
	}
	var live []core.Order
	for _, o := range f.orders {
		if o.Live() {
			live = append(live, o)
		}
	}
	known, _ := f.OrderStatuses(ctx, also)
	return f.voucher, live, known, nil
}
func (f fakeLedger) OrderStatuses(_ context.Context, ids []int64) (map[int64]core.OrderStatus, error) {
	out := map[int64]core.OrderStatus{}
	for _, o := range f.orders {
		if slices.Contains(ids, o.ID) {
			out[o.ID] = o.Status
		}
	}
	return out, nil
}
func (f fakeLedger) LetteredOrders(context.Context, int64) ([]core.Order, error) {
	return f.lettered, nil
}

func (f fakeLedger) FindVoucher(ctx context.Context, id int64) (core.Voucher, error) {
	v, _, _, err := f.SaleSnapshot(ctx, id, nil)
	return v, err
}

type fakeHolder []core.Order

func (h fakeHolder) HeldOrders(context.Context, int64) ([]core.Order, error) { return h, nil }

// counterIDs numbers orders 1, 2, …
type counterIDs struct{ n atomic.Int64 }

func (c *counterIDs) NextID(context.Context) (int64, error) { return c.n.Add(1), nil }

// noReservations is a reservation that holds no order.
type noReservations struct{}

func (noReservations) Reserve(context.Context, core.Order) (core.Reservation, error) {
	return core.Reservation{}, errors.New("not for sale")
}
func (noReservations) Release(context.Context, core.Order) error { return nil }
func (noReservations) ReservedOrder(context.Context, int64, int64) (int64, bool, error) {
	return 0, false, nil
}

// TestEnsureRebuildsOncePerIncarnation: a hundred requests at once rebuild
// once; later ones cost no rebuild until the incarnation changes.
func TestEnsureRebuildsOncePerIncarnation(t *testing.T) {
	live := newFakeLive("run-1")
	r := recovery.New(recovery.Config{Live: live, Ledger: fakeLedger{voucher: core.Voucher{ID: 7, Stock: 5}}})
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if err := r.Ensure(context.Background(), 7, core.Wait); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := live.restores.Load(); n != 1 {
		t.Fatalf("%d rebuilds for one voucher at once, want 1", n)
	}
	r.Ensure(context.Background(), 7, core.Wait)
	if n := live.restores.Load(); n != 1 {
		t.Fatalf("a verified voucher was rebuilt again (%d)", n)
	}
	live.mu.Lock()
	live.incarnation = "run-2" // Redis came back from an old snapshot
	live.mu.Unlock()
	r.Ensure(context.Background(), 7, core.Wait)
	if n := live.restores.Load(); n != 2 {
		t.Fatalf("a new incarnation did not rebuild (%d rebuilds)", n)
	}
}

// fakeOrders is the database's orders, by buyer.
type fakeOrders map[int64]core.Order

func (f fakeOrders) FindOrder(_ context.Context, id int64) (core.Order, error) {
	for _, o := range f {
		if o.ID == id {
			return o, nil
		}
	}
	return core.Order{}, core.ErrOrderNotFound
}
func (f fakeOrders) OrderOfBuyer(_ context.Context, user, voucher int64) (core.Order, error) {
	if o, ok := f[user]; ok && o.VoucherID == voucher {
		return o, nil
	}
	return core.Order{}, core.ErrOrderNotFound
}

// TestOrderReadsDuringAnotherRebuildAskTheDatabase: while another
// instance's rebuild holds the voucher, a persisted order is answered from
// the database at once, however long the rebuild; one the database lacks
// (queued, or none) is busy.
func TestOrderReadsDuringAnotherRebuildAskTheDatabase(t *testing.T) {
	live := newFakeLive("run-2")
	live.fences[7] = "another instance's"
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 5}}
	// The other rebuild outlasts the read's own deadline.
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger, Queue: core.Capabilities{Holder: fakeHolder{}}, Wait: time.Minute})
	orders := fakeOrders{1: {ID: 101, UserID: 1, VoucherID: 7}}
	s := core.NewSeckill(core.SeckillConfig{IDs: &counterIDs{}, Reserver: noReservations{}, Orders: orders, Recovery: r})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	id, status, err := s.OrderOf(ctx, 1, 7)
	if err != nil || id != 101 || status != core.StatusCreated {
		t.Fatalf("a persisted order during another rebuild: %d %q %v, want 101 created from the database", id, status, err)
	}
	// Not a timing test: "at once" is far below any wait a read could
	// have been given (the rebuild's Wait is a minute, the read's 3 s).
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the read waited %v for the rebuild, want no wait", took)
	}
	if _, _, err := s.OrderOf(ctx, 2, 7); !errors.Is(err, core.ErrBusy) {
		t.Fatalf("an order the database lacks during another rebuild: %v, want busy", err)
	}
}

// TestARebuildCountsOnlyLiveOrders: the database holds one created order
// and one cancelled (its unit back in the stock column), whose message the
// queue still holds unacknowledged. The rebuild marks the live order's
// buyer only and sells the stock column as it is: the cancelled order's
// unit is not taken again, and its buyer may buy again.
func TestARebuildCountsOnlyLiveOrders(t *testing.T) {
	live := newFakeLive("run-1")
	cancelled := core.Order{ID: 12, UserID: 2, VoucherID: 7, Status: core.StatusCancelled}
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 9}, orders: []core.Order{
		{ID: 11, UserID: 1, VoucherID: 7, Status: core.StatusCreated}, cancelled,
	}}
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger, Queue: core.Capabilities{Holder: fakeHolder{{ID: 12, UserID: 2, VoucherID: 7}}}})
	report, err := r.Reconcile(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	s := live.state[7]
	if _, marked := s.Buyers[2]; marked || s.Buyers[1] != 11 || s.Stock != 9 {
		t.Fatalf("after the rebuild: stock %d, buyers %v; want 9 and the live order's buyer only", s.Stock, s.Buyers)
	}
	if report.Persisted != 1 || report.HeldOnly != 0 {
		t.Fatalf("report: %d persisted, %d held only; want 1 live and none", report.Persisted, report.HeldOnly)
	}
}

// TestARebuildKeepsTheDeadLettersUnitsAndBuyers: an open dead letter's
// order holds its unit and its buyer's mark through a rebuild, as a queued
// order does (the fault run's rebuild dealt them back on sale, the buyers
// free to buy again, and a re-drive then sold them twice); one the
// database has meanwhile (re-driven) is the database's, counted once.
func TestARebuildKeepsTheDeadLettersUnitsAndBuyers(t *testing.T) {
	live := newFakeLive("run-1")
	ledger := fakeLedger{voucher: core.Voucher{ID: 7, Stock: 9},
		orders:   []core.Order{{ID: 11, UserID: 1, VoucherID: 7, Status: core.StatusCreated}},
		lettered: []core.Order{{ID: 21, UserID: 3, VoucherID: 7}, {ID: 22, UserID: 4, VoucherID: 7}, {ID: 11, UserID: 1, VoucherID: 7}}}
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger, Queue: core.Capabilities{Holder: fakeHolder{}}})
	report, err := r.Reconcile(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	s := live.state[7]
	if s.Stock != 7 || s.Buyers[3] != 21 || s.Buyers[4] != 22 || s.Buyers[1] != 11 || len(s.Buyers) != 3 {
		t.Fatalf("after the rebuild: stock %d, buyers %v; want 7 (9 less the two letters' units) and the letters' buyers marked", s.Stock, s.Buyers)
	}
	if report.HeldOnly != 2 {
		t.Fatalf("report: %d held only, want the two letters' orders", report.HeldOnly)
	}
	au, err := r.Audit(context.Background(), 7)
	if err != nil || au.Lettered != 3 || au.ExpectedStock != 7 || len(au.Differences) != 0 {
		t.Fatalf("audit after the rebuild: %+v, %v; want the letters counted, nothing different", au, err)
	}
}

// partLive is a live store whose vouchers are in parts (Redis: buckets),
// each shopper's part intact or not as intact says.
type partLive struct {
	*fakeLive
	intact func(userID int64) bool
}

func (l partLive) Features() recovery.LiveFeatures {
	return recovery.LiveFeatures{ShopperVerifier: l}
}

func (l partLive) VerifiedFor(_ context.Context, _, userID int64, _ string) (bool, error) {
	return l.intact(userID), nil
}

// TestAShopperOfAnIntactPartBuysWhileTheRestIsRebuilt: a voucher that
// needs a rebuild, which another instance holds (its fence), lets the
// shoppers of an intact part go on at once, while a shopper of a lost part
// waits for the rebuild and is told busy; the voucher's own verification
// runs in the background and, once the other rebuild is gone, rebuilds it.
func TestAShopperOfAnIntactPartBuysWhileTheRestIsRebuilt(t *testing.T) {
	live := newFakeLive("run-2")
	live.state[7] = recovery.LiveState{Present: true, Stock: 5, Buyers: map[int64]int64{}, VerifiedIn: "run-1"}
	live.fences[7] = "another instance's"
	parts := partLive{fakeLive: live, intact: func(u int64) bool { return u%2 == 0 }}
	r := recovery.New(recovery.Config{Live: parts, Ledger: fakeLedger{voucher: core.Voucher{ID: 7, Stock: 5}},
		Wait: 200 * time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	for u := int64(2); u <= 100; u += 2 {
		wg.Go(func() {
			start := time.Now()
			if err := r.EnsureShopper(ctx, 7, u); err != nil || time.Since(start) > 100*time.Millisecond {
				t.Errorf("shopper %d of an intact part: %v after %v, want to go on at once", u, err, time.Since(start))
			}
		})
	}
	wg.Wait()
	if err := r.EnsureShopper(ctx, 7, 1); !errors.Is(err, core.ErrBusy) {
		t.Fatalf("a shopper of a lost part while another instance rebuilds: %v, want busy", err)
	}
	if r.Trusted(ctx, 7) {
		t.Fatal("the voucher is trusted while its rebuild has not run")
	}
	live.mu.Lock()
	delete(live.fences, 7) // the other instance gave up
	live.mu.Unlock()
	deadline := time.Now().Add(3 * time.Second)
	for !r.Trusted(ctx, 7) {
		// Each intact shopper's request starts the voucher's verification
		// again if none is running.
		if err := r.EnsureShopper(ctx, 7, 2); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the background verification never rebuilt the voucher")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if live.restores.Load() != 1 {
		t.Fatalf("%d restores, want 1", live.restores.Load())
	}
}

// TestAFailingRebuildBacksOff: a voucher whose rebuild keeps failing (a
// Redis out of memory) is not rebuilt once per shopper: 300 requests over
// about 0.6 s try a handful of rebuilds, each further apart, and are told
// busy meanwhile; another voucher is rebuilt at once all the while; once
// the live store takes writes again, the voucher is rebuilt after its
// backoff and sells.
func TestAFailingRebuildBacksOff(t *testing.T) {
	live := newFakeLive("run-1")
	ledger := fakeLedgers{7: {voucher: core.Voucher{ID: 7, Stock: 5}}, 8: {voucher: core.Voucher{ID: 8, Stock: 5}}}
	r := recovery.New(recovery.Config{Live: live, Ledger: ledger})
	live.failRestore.Store(true)
	var busy int
	for range 300 {
		err := r.Ensure(context.Background(), 7, core.Wait)
		if err == nil {
			t.Fatal("a rebuild that cannot restore succeeded")
		}
		if errors.Is(err, core.ErrBusy) {
			busy++
		}
		time.Sleep(2 * time.Millisecond)
	}
	if n := live.attempts.Load(); n > 8 {
		t.Fatalf("300 requests over a failing live store tried %d rebuilds, want a handful (backing off)", n)
	}
	if busy < 250 {
		t.Fatalf("%d of 300 requests were told busy, want nearly all (held off, not a rebuild each)", busy)
	}
	live.failRestore.Store(false)
	if err := r.Ensure(context.Background(), 8, core.Wait); err != nil {
		t.Fatalf("another voucher while the first backs off: %v", err)
	}
	var err error
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = r.Ensure(context.Background(), 7, core.Wait); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("the voucher once the live store takes writes again: %v", err)
	}
}

// TestABackedOffRebuildGoesOnOnceRedisChanges: a voucher whose rebuilds
// failed long enough to back off to the cap is rebuilt within the cap (a
// second) once the live store takes writes again, and at once when the
// live store is another incarnation (a squeeze that ended with a stream
// evicted): a 5 s cap kept the sale stopped 1.4 s after the squeeze
// ended, in the lab's squeeze.
func TestABackedOffRebuildGoesOnOnceRedisChanges(t *testing.T) {
	live := newFakeLive("run-1")
	r := recovery.New(recovery.Config{Live: live, Ledger: fakeLedgers{7: {voucher: core.Voucher{ID: 7, Stock: 5}}}})
	live.failRestore.Store(true)
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_ = r.Ensure(context.Background(), 7, core.Wait)
	}
	live.failRestore.Store(false)
	healed := time.Now()
	for r.Ensure(context.Background(), 7, core.Wait) != nil {
		if time.Since(healed) > 1500*time.Millisecond {
			t.Fatalf("not rebuilt %v after the live store took writes again, want within the 1 s cap", time.Since(healed))
		}
		time.Sleep(10 * time.Millisecond)
	}
	live.failRestore.Store(true)
	for range 20 { // backing off again, in run-1
		_ = r.Ensure(context.Background(), 7, core.Wait)
		time.Sleep(20 * time.Millisecond)
	}
	live.failRestore.Store(false)
	live.mu.Lock()
	live.incarnation = "run-2"
	live.mu.Unlock()
	if err := r.Ensure(context.Background(), 7, core.Wait); err != nil {
		t.Fatalf("another incarnation: %v, want rebuilt at once (a backoff is its incarnation's)", err)
	}
}

// fakeLedgers is a database of several vouchers.
type fakeLedgers map[int64]fakeLedger

func (f fakeLedgers) SaleSnapshot(ctx context.Context, id int64, also []int64) (core.Voucher, []core.Order, map[int64]core.OrderStatus, error) {
	l, ok := f[id]
	if !ok {
		return core.Voucher{}, nil, nil, core.ErrVoucherNotFound
	}
	return l.SaleSnapshot(ctx, id, also)
}
func (f fakeLedgers) OrderStatuses(ctx context.Context, ids []int64) (map[int64]core.OrderStatus, error) {
	return map[int64]core.OrderStatus{}, nil
}
func (f fakeLedgers) LetteredOrders(ctx context.Context, id int64) ([]core.Order, error) {
	return f[id].lettered, nil
}

func (f fakeLedgers) FindVoucher(ctx context.Context, id int64) (core.Voucher, error) {
	v, _, _, err := f.SaleSnapshot(ctx, id, nil)
	return v, err
}
