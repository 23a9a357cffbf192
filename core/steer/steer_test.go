package steer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/steer"
)

// memStore is a database of one voucher and the action record.
type memStore struct {
	mu        sync.Mutex
	v         core.Voucher
	actions   []steer.Action
	done      map[int64]bool
	consumers core.ConsumerSetting
}

func (m *memStore) ConsumerSetting(context.Context) (core.ConsumerSetting, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.consumers, nil
}

func (m *memStore) SetConsumers(_ context.Context, decide func(core.ConsumerSetting) (core.ConsumerSetting, steer.Action)) (core.ConsumerSetting, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, a := decide(m.consumers)
	c.Version = m.consumers.Version + 1
	m.consumers = c
	a.ID = int64(len(m.actions) + 1)
	m.actions = append(m.actions, a)
	return c, a.ID, nil
}

func (m *memStore) Steer(_ context.Context, id int64, decide func(core.Voucher) (core.Voucher, steer.Action, error)) (core.Voucher, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != m.v.ID {
		return core.Voucher{}, 0, core.ErrVoucherNotFound
	}
	v, a, err := decide(m.v)
	if err != nil {
		return core.Voucher{}, 0, err
	}
	m.v = v
	a.ID = int64(len(m.actions) + 1)
	m.actions = append(m.actions, a)
	return v, a.ID, nil
}

func (m *memStore) Done(_ context.Context, id int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done[id] = true
	return nil
}

func (m *memStore) Pending(_ context.Context, before time.Time, limit int) ([]steer.Action, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []steer.Action
	for _, a := range m.actions {
		if !m.done[a.ID] && a.At.Before(before) {
			out = append(out, a)
		}
	}
	return out, nil
}

func (m *memStore) Actions(context.Context, steer.Filter) ([]steer.Action, error) {
	return m.actions, nil
}

func (m *memStore) SwitchOn(context.Context) (bool, error) { return false, nil }

func (m *memStore) Switch(context.Context, bool, steer.Action) ([]int64, int64, error) {
	return nil, 0, errors.New("not kept here")
}

func (m *memStore) Unended(context.Context, time.Time) ([]core.Voucher, error) {
	return []core.Voucher{m.v}, nil
}

func (m *memStore) BeginStock(_ context.Context, a steer.Action) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a.ID = int64(len(m.actions) + 1)
	m.actions = append(m.actions, a)
	return a.ID, nil
}

// FinishStock moves the column once per action, as the database does.
func (m *memStore) FinishStock(_ context.Context, id, _, delta int64, applied bool) (bool, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done[id] {
		return false, false, nil
	}
	m.done[id] = true
	if !applied || m.v.Stock+delta < 0 {
		return true, true, nil
	}
	m.v.Stock += delta
	return false, true, nil
}

func (m *memStore) FindVoucher(context.Context, int64) (core.Voucher, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.v, nil
}

// flakyLive is a live store that fails (down) or is rebuilding (busy) as
// told, and remembers what it was last given.
type flakyLive struct {
	mu         sync.Mutex
	down       bool
	busyFor    int
	applied    core.Voucher
	applyCalls int
	stock      int64
	stockOf    map[int64]bool // action id -> applied
}

// ChangeStock keeps a live stock of its own, once per action id (the
// script's steered field); down, it fails as Apply does.
func (l *flakyLive) ChangeStock(_ context.Context, _ core.Voucher, id, delta int64) (steer.StockChange, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return steer.StockChange{}, errors.New("connection refused")
	}
	if l.stockOf == nil {
		l.stockOf = map[int64]bool{}
	}
	if ok, seen := l.stockOf[id]; seen {
		return steer.StockChange{Applied: ok, Remaining: l.stock}, nil
	}
	ok := l.stock+delta >= 0
	l.stockOf[id] = ok
	if ok {
		l.stock += delta
	}
	return steer.StockChange{Applied: ok, Remaining: l.stock}, nil
}

func (l *flakyLive) Apply(_ context.Context, v core.Voucher, _ bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applyCalls++
	switch {
	case l.down:
		return errors.New("connection refused")
	case l.busyFor > 0:
		l.busyFor--
		return core.ErrBusy
	}
	l.applied = v
	return nil
}

type noLock struct{}

func (noLock) Lock(context.Context, string, time.Duration) (func(), error) { return func() {}, nil }

type announced struct {
	mu  sync.Mutex
	ids []int64
}

func (a *announced) VoucherChanged(_ context.Context, id int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, id)
}

func setup(v core.Voucher) (*steer.Steering, *memStore, *flakyLive, *announced) {
	store := &memStore{v: v, done: map[int64]bool{}}
	live := &flakyLive{}
	ann := &announced{}
	return steer.New(steer.Config{Store: store, Live: live, Locker: noLock{}, Announcer: ann}), store, live, ann
}

func onSale() core.Voucher {
	return core.Voucher{ID: 7, Title: "t", PayValue: 1, ActualValue: 2, Stock: 5,
		BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}
}

// TestAnActionTheLiveStoreMissedIsFinishedByTheDuty: the live store down,
// the pause is in the database and its record pending, and the operator is
// told it could not hold; once the live store answers, the duty writes
// the database's settings into it and the record is done.
func TestAnActionTheLiveStoreMissedIsFinishedByTheDuty(t *testing.T) {
	s, store, live, ann := setup(onSale())
	live.down = true
	r := steer.Request{VoucherID: 7, Operator: steer.Operator{Name: "ops"}}
	if _, err := s.Pause(context.Background(), r); core.CodeOf(err) != core.CodeUnavailable {
		t.Fatalf("pause with the live store down: %v, want unavailable", err)
	}
	if !store.v.Paused() || store.done[1] {
		t.Fatalf("the database has paused %v, record done %v: want paused, pending", store.v.Paused(), store.done[1])
	}
	live.down = false
	store.actions[0].At = time.Now().Add(-time.Minute) // its instance long gone
	if err := s.Duty().Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !live.applied.Paused() || !store.done[1] || len(ann.ids) != 1 {
		t.Fatalf("after the duty: live paused %v, done %v, announced %v", live.applied.Paused(), store.done[1], ann.ids)
	}
}

// TestAnActionWaitsOutARebuild: the live store is rebuilding the voucher
// for a few tries; the action waits and then holds.
func TestAnActionWaitsOutARebuild(t *testing.T) {
	s, store, live, _ := setup(onSale())
	live.busyFor = 3
	v, err := s.Pause(context.Background(), steer.Request{VoucherID: 7})
	if err != nil || !v.Paused() || !live.applied.Paused() || !store.done[1] || live.applyCalls != 4 {
		t.Fatalf("pause during a rebuild: %v %v, live %v after %d calls, done %v", v.Paused(), err, live.applied.Paused(), live.applyCalls, store.done[1])
	}
}

// TestTheVouchersStateRefusesSomeActions: an ended sale cannot be paused
// or resumed; a begun one's begin does not move; a window must stay one;
// nothing refused is written.
func TestTheVouchersStateRefusesSomeActions(t *testing.T) {
	ended := onSale()
	ended.EndAt = time.Now().Add(-time.Minute)
	s, _, _, _ := setup(ended)
	for name, act := range map[string]func(context.Context, steer.Request) (core.Voucher, error){"pause": s.Pause, "resume": s.Resume} {
		if _, err := act(context.Background(), steer.Request{VoucherID: 7}); !steer.IsConflict(err) || core.CodeOf(err) != core.CodeEnded {
			t.Fatalf("%s an ended sale: %v, want a conflict, ended", name, err)
		}
	}
	s, store, _, _ := setup(onSale())
	_, err := s.Reschedule(context.Background(), steer.Request{VoucherID: 7}, steer.Window{BeginAt: time.Now().Add(time.Minute)})
	if !steer.IsConflict(err) || core.CodeOf(err) != core.CodeAlreadyBegun {
		t.Fatalf("moving a running sale's begin: %v, want a conflict, already_begun", err)
	}
	_, err = s.Reschedule(context.Background(), steer.Request{VoucherID: 7}, steer.Window{EndAt: time.Now().Add(-2 * time.Hour)})
	if core.CodeOf(err) != core.CodeBadRequest {
		t.Fatalf("an end before the begin: %v, want bad_request", err)
	}
	if len(store.actions) != 0 {
		t.Fatalf("refused actions recorded: %v", store.actions)
	}
	if _, err := s.Pause(context.Background(), steer.Request{VoucherID: 8}); !errors.Is(err, core.ErrVoucherNotFound) {
		t.Fatalf("an unknown voucher: %v", err)
	}
}

// TestAStockChangeCountsOnceWhateverDiesBetween: the live store takes the
// units and the instance dies before the database follows (the live
// store's reply lost); the duty finishes the action: the column moves
// once, and the live store, asked again with the action's id, does not
// take the units twice. Taking more than remains is refused, and nothing
// moves.
func TestAStockChangeCountsOnceWhateverDiesBetween(t *testing.T) {
	s, store, live, _ := setup(onSale())
	live.stock = 5 // the live units left; the column says 5 too
	left, err := s.ChangeStock(context.Background(), steer.Request{VoucherID: 7}, 20)
	if err != nil || left != 25 || store.v.Stock != 25 {
		t.Fatalf("+20: %d %v, column %d; want 25 left both sides", left, err, store.v.Stock)
	}
	if _, err := s.ChangeStock(context.Background(), steer.Request{VoucherID: 7}, -26); !steer.IsConflict(err) || core.CodeOf(err) != core.CodeNotEnoughStock {
		t.Fatalf("taking 26 of 25: %v, want not_enough_stock", err)
	}
	if live.stock != 25 || store.v.Stock != 25 {
		t.Fatalf("after a refused take: live %d, column %d; want 25 both", live.stock, store.v.Stock)
	}

	// The live half done, the instance gone before the database's.
	id, _ := store.BeginStock(context.Background(), steer.Action{At: time.Now().Add(-time.Minute), Kind: steer.Stock, VoucherID: 7,
		After: []byte(`{"delta":-4}`)})
	if _, err := live.ChangeStock(context.Background(), store.v, id, -4); err != nil {
		t.Fatal(err)
	}
	for range 2 { // two instances' duties, one after the other
		if err := s.Duty().Do(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if live.stock != 21 || store.v.Stock != 21 || !store.done[id] {
		t.Fatalf("after the duty: live %d, column %d, done %v; want 21 both, once", live.stock, store.v.Stock, store.done[id])
	}
}
