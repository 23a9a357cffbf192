package steer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/steer"
)

// board is a consumers' board whose instances ack as told.
type board struct {
	mu      sync.Mutex
	down    bool
	setting core.ConsumerSetting
	acks    map[string]int64
	// follow: instances that ack whatever is written
	follow []string
}

func (b *board) Write(_ context.Context, s core.ConsumerSetting) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		return errors.New("connection refused")
	}
	b.setting = s
	for _, name := range b.follow {
		b.acks[name] = s.Version
	}
	return nil
}

func (b *board) Acks(context.Context, time.Duration) (map[string]int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int64{}
	for k, v := range b.acks {
		out[k] = v
	}
	return out, nil
}

func consumersSetup(b *board) (*steer.Steering, *memStore) {
	store := &memStore{v: onSale(), done: map[int64]bool{}}
	return steer.New(steer.Config{Store: store, Locker: noLock{}, Consumers: b}), store
}

// TestAConsumersPauseAnswersOnceEveryInstanceRunsIt: the pause is
// recorded with the setting before and after, written to the board, and
// answered once both instances ack it; an instance that never does is
// named in a 503.
func TestAConsumersPauseAnswersOnceEveryInstanceRunsIt(t *testing.T) {
	b := &board{acks: map[string]int64{"a": 0, "b": 0}, follow: []string{"a", "b"}}
	s, store := consumersSetup(b)
	r := steer.Request{Operator: steer.Operator{Name: "ops"}}
	got, err := s.PauseConsumers(context.Background(), r)
	if err != nil || !got.Paused || got.Version != 1 || !b.setting.Paused {
		t.Fatalf("pause: %+v %v; board %+v", got, err, b.setting)
	}
	a := store.actions[0]
	if a.Kind != steer.PauseConsumers || string(a.Before) != `{"paused":false,"perSecond":0}` || string(a.After) != `{"paused":true,"perSecond":0}` || !store.done[1] {
		t.Fatalf("record %+v, done %v", a, store.done[1])
	}
	b.follow = []string{"a"} // b stops acking
	began := time.Now()
	_, err = s.CapConsumers(context.Background(), r, 50)
	if core.CodeOf(err) != core.CodeUnavailable || !strings.Contains(err.Error(), "consumers of b have not confirmed") {
		t.Fatalf("cap with instance b silent: %v", err)
	}
	if time.Since(began) < 9*time.Second {
		t.Fatalf("gave up on b after %v, want the 10 s patience", time.Since(began))
	}
	if b.setting.PerSecond != 50 || b.setting.Version != 2 {
		t.Fatalf("board %+v, want the cap written all the same", b.setting)
	}
}

// TestAConsumersActionTheBoardMissedIsFinishedByTheDuty: the board down,
// the setting is in the database and its record pending; the duty writes
// it to the board once it answers.
func TestAConsumersActionTheBoardMissedIsFinishedByTheDuty(t *testing.T) {
	b := &board{acks: map[string]int64{}, down: true}
	s, store := consumersSetup(b)
	if _, err := s.CapConsumers(context.Background(), steer.Request{}, 20); core.CodeOf(err) != core.CodeUnavailable {
		t.Fatalf("cap with the board down: %v", err)
	}
	if store.consumers.PerSecond != 20 || store.done[1] {
		t.Fatalf("database %+v, done %v: want the cap, pending", store.consumers, store.done[1])
	}
	b.down = false
	store.actions[0].At = time.Now().Add(-time.Minute)
	if err := s.Duty().Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.setting.PerSecond != 20 || b.setting.Version != 1 || !store.done[1] {
		t.Fatalf("after the duty: board %+v, done %v", b.setting, store.done[1])
	}
}

// TestASaleWithNoQueueHasNoConsumersToSteer: not_supported, nothing
// recorded.
func TestASaleWithNoQueueHasNoConsumersToSteer(t *testing.T) {
	store := &memStore{v: onSale(), done: map[int64]bool{}}
	s := steer.New(steer.Config{Store: store, Locker: noLock{}})
	if _, err := s.PauseConsumers(context.Background(), steer.Request{}); core.CodeOf(err) != core.CodeNotSupported || !steer.IsConflict(err) {
		t.Fatalf("pause without a queue: %v, want not_supported", err)
	}
	if _, err := s.CapConsumers(context.Background(), steer.Request{}, -1); core.CodeOf(err) != core.CodeBadRequest {
		t.Fatalf("a negative cap: %v, want bad_request", err)
	}
	if len(store.actions) != 0 {
		t.Fatalf("%d actions recorded", len(store.actions))
	}
}
