package relay_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
	"github.com/seckill-lab/seckill/core/relay"
)

// fakeOutbox is queuetest.Acked as the reservation's outbox: fed by a hand-off,
// keeping what a relay read until acked, with stats.
type fakeOutbox struct{ *queuetest.Acked }

func (o fakeOutbox) Capabilities() core.Capabilities {
	h := core.Handoff{Command: []string{"XADD", core.HandoffKey, "*", "order", core.HandoffBody},
		Key: func(int64) string { return "outbox" }}
	return core.Capabilities{Name: "outbox", Handoff: &h, Stats: o,
		Guarantees: core.Guarantees{Acknowledged: true, DurableAcrossConsumerCrash: true}}
}

func (o fakeOutbox) Stats(context.Context) (core.QueueStats, error) {
	ready, pending, _, _ := o.State()
	s := core.UnknownStats
	s.Depth, s.Pending = int64(ready), int64(pending)
	return s, nil
}

// fakeBroker confirms nothing for its first refusals forwards, then keeps
// what it is given; at each forward it records whether the outbox had
// acked anything of the batch already.
type fakeBroker struct {
	mu       sync.Mutex
	refusals int
	calls    int
	got      map[int64]int
	outbox   *queuetest.Acked
	early    int // forwards that found some of their batch already acked
}

func (b *fakeBroker) Capabilities() core.Capabilities {
	return core.Capabilities{Name: "broker", Forwarder: b, Guarantees: core.Guarantees{Acknowledged: true}}
}
func (b *fakeBroker) Consumer(context.Context, int) (core.Consumer, error) {
	return nil, errors.New("none")
}
func (b *fakeBroker) Close() error { return nil }

func (b *fakeBroker) Forward(_ context.Context, orders []core.Order) error {
	_, _, acked, _ := b.outbox.State()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if acked > 0 && b.calls <= b.refusals+1 {
		b.early++
	}
	if b.calls <= b.refusals {
		return errors.New("broker down")
	}
	for _, o := range orders {
		b.got[o.ID]++
	}
	return nil
}

// TestTheRelayAcksTheOutboxOnlyAfterTheBrokerConfirmed: a broker that
// refuses the first forwards gets the same batch again until it confirms;
// the outbox acks nothing before, every order reaches the broker, an entry
// that does not decode is dead-lettered on the outbox, and the failures
// are counted.
func TestTheRelayAcksTheOutboxOnlyAfterTheBrokerConfirmed(t *testing.T) {
	box := queuetest.NewAcked()
	for id := int64(1); id <= 10; id++ {
		box.Push(core.EncodeOrder(core.Order{ID: id, UserID: id, VoucherID: 7, CreatedAt: time.Now()}), 1)
	}
	box.Push([]byte("not an order"), 1)
	broker := &fakeBroker{refusals: 3, got: map[int64]int{}, outbox: box}
	q, err := relay.New(fakeOutbox{box}, broker, relay.Config{Batch: 100, RetryInitial: time.Millisecond, RetryMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	caps := core.CapabilitiesOf(q)
	if caps.Name != "broker" || caps.Handoff == nil || caps.Relay == nil {
		t.Fatalf("the join: %+v", caps)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { core.RunQueueDuties(ctx, q, nil); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, pending, acked, dead := box.State()
		if acked == 10 && dead == 1 && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox: %d pending, %d acked, %d dead", pending, acked, dead)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	broker.mu.Lock()
	defer broker.mu.Unlock()
	if len(broker.got) != 10 || broker.early != 0 {
		t.Fatalf("broker got %d orders, %d forwards found their batch acked already", len(broker.got), broker.early)
	}
	st, err := caps.Relay.RelayStats(context.Background())
	if err != nil || st.Forwarded != 10 || st.Failures != 3 || st.LastError != "" {
		t.Fatalf("relay stats %+v, %v: want 10 forwarded, 3 failures, no error since", st, err)
	}
	if box.DeadReasons()["11"] != string(core.DeadLetterPoison) {
		t.Fatalf("the undecodable entry: %v", box.DeadReasons())
	}
}

// TestARelayedQueueTurnsShoppersAwayAtTheOutboxCap: Admit refuses with
// busy, naming the outbox, once the backlog reaches the cap.
func TestARelayedQueueTurnsShoppersAwayAtTheOutboxCap(t *testing.T) {
	box := queuetest.NewAcked()
	broker := &fakeBroker{got: map[int64]int{}, outbox: box}
	q, err := relay.New(fakeOutbox{box}, broker, relay.Config{OutboxCap: 3, IntakeEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	intake := core.CapabilitiesOf(q).Intake
	if intake == nil || intake.Accept(context.Background()) != nil {
		t.Fatal("an empty outbox refuses")
	}
	for id := int64(1); id <= 3; id++ {
		box.Push(core.EncodeOrder(core.Order{ID: id, UserID: id, VoucherID: 7}), 1)
	}
	err = intake.Accept(context.Background())
	if e, ok := errors.AsType[*core.Error](err); !ok || e.Code != core.CodeBusy || !strings.Contains(e.Message, "outbox") {
		t.Fatalf("at the cap: %v, want busy naming the outbox", err)
	}
	if q, _ := relay.New(fakeOutbox{box}, broker, relay.Config{}); core.CapabilitiesOf(q).Intake != nil {
		t.Fatal("no cap, yet an admission")
	}
}

// TestRelayedRefusesWhatCannotBeRelayed: an outbox the reservation does
// not feed, or a "broker" with no Forwarder, is a wiring error.
func TestRelayedRefusesWhatCannotBeRelayed(t *testing.T) {
	box := queuetest.NewAcked()
	if _, err := relay.New(box, &fakeBroker{outbox: box}, relay.Config{}); err == nil {
		t.Error("an outbox without a hand-off was accepted")
	}
	if _, err := relay.New(fakeOutbox{box}, box, relay.Config{}); err == nil {
		t.Error("a broker without a Forwarder was accepted")
	}
}

// hangingBroker never answers a forward: it waits for the attempt's end.
type hangingBroker struct{ fakeBroker }

func (b *hangingBroker) Capabilities() core.Capabilities {
	return core.Capabilities{Name: "broker", Forwarder: b, Guarantees: core.Guarantees{Acknowledged: true}}
}

func (b *hangingBroker) Forward(ctx context.Context, _ []core.Order) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestAStoppedRelayGivesUpAfterItsGrace: a broker that neither confirms
// nor refuses holds a relay's batch; at the stop the relay tries for
// FinishTimeout more and then gives up, leaving the batch pending in the
// outbox (for a restart or another relay), so the process still stops in
// time.
func TestAStoppedRelayGivesUpAfterItsGrace(t *testing.T) {
	box := queuetest.NewAcked()
	box.Push(core.EncodeOrder(core.Order{ID: 1, UserID: 1, VoucherID: 7, CreatedAt: time.Now()}), 1)
	q, err := relay.New(fakeOutbox{box}, &hangingBroker{}, relay.Config{FinishTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { core.RunQueueDuties(ctx, q, nil); close(done) }()
	for _, pending, _, _ := box.State(); pending == 0; _, pending, _, _ = box.State() {
		time.Sleep(time.Millisecond)
	}
	stopped := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the relay did not stop within 5 s of the stop, with a grace of 200 ms")
	}
	if took := time.Since(stopped); took < 150*time.Millisecond || took > 2*time.Second {
		t.Errorf("stopped %v after the signal, want about the grace of 200ms", took)
	}
	if _, pending, acked, _ := box.State(); pending != 1 || acked != 0 {
		t.Errorf("outbox after the stop: %d pending, %d acked; want the batch left pending", pending, acked)
	}
}

// countingOutbox is fakeOutbox counting the consumers open at once.
type countingOutbox struct {
	fakeOutbox
	mu         sync.Mutex
	open, most int
}

func (o *countingOutbox) Consumer(context.Context, int) (core.Consumer, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.open++
	o.most = max(o.most, o.open)
	return countedConsumer{o.Acked, o}, nil
}

type countedConsumer struct {
	*queuetest.Acked
	o *countingOutbox
}

func (c countedConsumer) Close() error {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	c.o.open--
	return nil
}

// TestOneRelayPerShardHoweverOftenTheDutiesRun: the queue's duties
// started twice at once (two pipelines on one queue) still run one relay
// of the shard: two would read its outbox under one consumer name and
// forward its pending entries twice.
func TestOneRelayPerShardHoweverOftenTheDutiesRun(t *testing.T) {
	box := &countingOutbox{fakeOutbox: fakeOutbox{queuetest.NewAcked()}}
	for id := int64(1); id <= 10; id++ {
		box.Push(core.EncodeOrder(core.Order{ID: id, UserID: id, VoucherID: 7, CreatedAt: time.Now()}), 1)
	}
	broker := &fakeBroker{got: map[int64]int{}, outbox: box.Acked}
	q, err := relay.New(box, broker, relay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { core.RunQueueDuties(ctx, q, nil) })
	wg.Go(func() { core.RunQueueDuties(ctx, q, nil) })
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, acked, _ := box.State(); acked == 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // ten more ticks of each set
	cancel()
	wg.Wait()
	box.mu.Lock()
	defer box.mu.Unlock()
	if box.most != 1 {
		t.Fatalf("%d relays of the shard ran at once, want 1", box.most)
	}
	if len(broker.got) != 10 {
		t.Fatalf("the broker got %d of the 10 orders", len(broker.got))
	}
}
