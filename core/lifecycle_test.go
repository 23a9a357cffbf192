package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// fakeLifecycleStore is the arbiter in memory: one mutex, conditional
// transitions, pending releases.
type fakeLifecycleStore struct {
	mu      sync.Mutex
	orders  map[int64]*core.Order
	stock   int64
	pending map[int64]core.Order
}

func (s *fakeLifecycleStore) CancelOrder(_ context.Context, id, owner int64, reason core.CancelReason, now time.Time) (core.Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok || (owner != 0 && o.UserID != owner) {
		return core.Order{}, core.ErrOrderNotFound
	}
	if o.Status != core.StatusCreated || (reason == core.CancelExpired && o.PayBy.After(now)) {
		return core.Order{}, core.ErrNotCancellable
	}
	o.Status, o.CancelReason = core.StatusCancelled, reason
	s.stock++
	s.pending[id] = *o
	return *o, nil
}
func (s *fakeLifecycleStore) CancelQueued(_ context.Context, o core.Order, reason core.CancelReason, _ time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.orders[o.ID]; ok {
		return false, nil
	}
	o.Status, o.CancelReason = core.StatusCancelled, reason
	s.orders[o.ID] = &o
	s.pending[o.ID] = o
	return true, nil
}
func (s *fakeLifecycleStore) DueOrders(_ context.Context, now time.Time, _ int) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for id, o := range s.orders {
		if o.Status == core.StatusCreated && !o.PayBy.After(now) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
func (s *fakeLifecycleStore) PendingReleases(context.Context, time.Time, int) ([]core.Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []core.Order
	for _, o := range s.pending {
		out = append(out, o)
	}
	return out, nil
}
func (s *fakeLifecycleStore) Released(_ context.Context, ids ...int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.pending, id)
	}
	return nil
}

// fakeReturner answers later while fenced, then gives each unit back once.
type fakeReturner struct {
	mu       sync.Mutex
	fenced   bool
	returned map[int64]int
}

func (r *fakeReturner) ReturnUnit(_ context.Context, o core.Order) (core.ReturnResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fenced {
		return core.ReturnLater, nil
	}
	if r.returned[o.ID] > 0 {
		return core.NothingToReturn, nil
	}
	r.returned[o.ID]++
	return core.UnitReturned, nil
}

// lostGuard counts the rebuilds the lifecycle asks for.
type lostGuard struct {
	core.LiveGuard
	mu   sync.Mutex
	lost []int64
}

func (g *lostGuard) Lost(_ context.Context, v int64, _ core.Patience) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lost = append(g.lost, v)
	return nil
}

// TestTheSweepExpiresDueOrdersAndRedrivesReleases: of two unpaid orders
// one is due; the sweep cancels it as expired, not the other. Its unit
// cannot go back while the voucher is fenced: the release stays pending,
// the sweep asks for the voucher's rebuild, and gives the unit back once
// the fence is gone — once, whatever further sweeps do.
func TestTheSweepExpiresDueOrdersAndRedrivesReleases(t *testing.T) {
	now := time.Now()
	store := &fakeLifecycleStore{pending: map[int64]core.Order{}, orders: map[int64]*core.Order{
		1: {ID: 1, UserID: 10, VoucherID: 7, Status: core.StatusCreated, PayBy: now.Add(-time.Second)},
		2: {ID: 2, UserID: 20, VoucherID: 7, Status: core.StatusCreated, PayBy: now.Add(time.Hour)},
	}}
	live := &fakeReturner{fenced: true, returned: map[int64]int{}}
	guard := &lostGuard{LiveGuard: core.NoRecovery}
	l := core.NewLifecycle(core.LifecycleConfig{Store: store, Live: live, Guard: guard})
	ctx := context.Background()
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if store.orders[1].Status != core.StatusCancelled || store.orders[1].CancelReason != core.CancelExpired || store.orders[2].Status != core.StatusCreated {
		t.Fatalf("after the sweep: order 1 %s, order 2 %s; want the due one expired only", store.orders[1].Status, store.orders[2].Status)
	}
	if len(store.pending) != 1 || len(guard.lost) == 0 {
		t.Fatalf("fenced: %d pending releases, %d rebuilds asked; want the release pending and a rebuild asked", len(store.pending), len(guard.lost))
	}
	live.mu.Lock()
	live.fenced = false
	live.mu.Unlock()
	for range 3 {
		if err := l.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(store.pending) != 0 || live.returned[1] != 1 || store.stock != 1 {
		t.Fatalf("after the fence: %d pending, unit returned %d times, stock column +%d; want none, once, +1", len(store.pending), live.returned[1], store.stock)
	}
	if _, err := l.Cancel(ctx, 20, 1); !errors.Is(err, core.ErrOrderNotFound) {
		t.Fatalf("another shopper cancels order 1: %v, want not found", err)
	}
	if _, err := l.Cancel(ctx, 10, 1); !errors.Is(err, core.ErrNotCancellable) {
		t.Fatalf("its shopper cancels the expired order: %v, want not cancellable", err)
	}
}

// fakeDeadlines hands out what it holds once.
type fakeDeadlines struct {
	mu  sync.Mutex
	due []core.Order
}

func (d *fakeDeadlines) ClaimDue(_ context.Context, now time.Time, _ int) ([]core.Order, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out, keep []core.Order
	for _, o := range d.due {
		if !o.PayBy.After(now) {
			out = append(out, o)
		} else {
			keep = append(keep, o)
		}
	}
	d.due = keep
	return out, nil
}

// TestAQueuedOrderPastItsDeadlineIsExpired: the delayed path hands out an
// order the database does not have yet; its cancelled row is inserted
// (the arbiter) and its unit goes back, once. One already persisted is
// cancelled as a row; a paid one is left alone. The database's sweep, the
// safety net, leaves what is not yet SafetyLag overdue to the delayed path.
func TestAQueuedOrderPastItsDeadlineIsExpired(t *testing.T) {
	now := time.Now()
	store := &fakeLifecycleStore{pending: map[int64]core.Order{}, orders: map[int64]*core.Order{
		2: {ID: 2, UserID: 20, VoucherID: 7, Status: core.StatusCreated, PayBy: now.Add(-time.Second)},
		3: {ID: 3, UserID: 30, VoucherID: 7, Status: core.StatusPaid, PayBy: now.Add(-time.Second)},
	}}
	deadlines := &fakeDeadlines{due: []core.Order{
		{ID: 1, UserID: 10, VoucherID: 7, PayBy: now.Add(-time.Second)}, // queued
		{ID: 2, UserID: 20, VoucherID: 7, PayBy: now.Add(-time.Second)},
		{ID: 3, UserID: 30, VoucherID: 7, PayBy: now.Add(-time.Second)},
	}}
	live := &fakeReturner{returned: map[int64]int{}}
	l := core.NewLifecycle(core.LifecycleConfig{Store: store, Live: live, Deadlines: deadlines, PayWindow: time.Minute})
	for range 2 {
		if err := l.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if o := store.orders[1]; o == nil || o.Status != core.StatusCancelled || o.CancelReason != core.CancelExpired {
		t.Fatalf("the queued order: %+v, want a cancelled row", o)
	}
	if store.orders[2].Status != core.StatusCancelled || store.orders[3].Status != core.StatusPaid {
		t.Fatalf("persisted %s, paid %s; want cancelled and left paid", store.orders[2].Status, store.orders[3].Status)
	}
	if live.returned[1] != 1 || live.returned[2] != 1 || live.returned[3] != 0 || len(store.pending) != 0 {
		t.Fatalf("units returned %v, %d pending; want orders 1 and 2 once each, 3 never", live.returned, len(store.pending))
	}
	if store.stock != 1 {
		t.Fatalf("stock column +%d, want +1: the queued order never took its unit from it", store.stock)
	}
}
