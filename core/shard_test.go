package core_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

// shardFake is one shard's queue: a queuetest.Acked fed by the reservation under
// its own key, that remembers which consumer indexes it handed out.
type shardFake struct {
	*queuetest.Acked
	key     string
	stats   core.QueueStats
	held    map[int64][]core.Order
	dead    []core.DeadLetter
	mu      sync.Mutex
	indexes []int
}

func newShardFake(key string) *shardFake {
	return &shardFake{Acked: queuetest.NewAcked(), key: key, held: map[int64][]core.Order{}}
}

func (q *shardFake) handoff() *core.Handoff {
	return &core.Handoff{Command: []string{"XADD", core.HandoffKey, "*", "order", core.HandoffBody},
		Key: func(int64) string { return q.key }}
}

// Capabilities are every one a fed queue can have.
func (q *shardFake) Capabilities() core.Capabilities {
	c := q.Acked.Capabilities()
	c.Handoff, c.Stats, c.Lister = q.handoff(), q, q
	c.DeadLetters = []core.DeadLetterSource{{Name: "dead " + q.key, Reader: q}}
	c.Duties = []core.Duty{{Name: "tick " + q.key, Every: time.Hour, Do: func(context.Context) error { return nil }}}
	return c
}

func (q *shardFake) Consumer(ctx context.Context, index int) (core.Consumer, error) {
	q.mu.Lock()
	q.indexes = append(q.indexes, index)
	q.mu.Unlock()
	return q.Acked, nil
}

func (q *shardFake) Stats(context.Context) (core.QueueStats, error) { return q.stats, nil }

func (q *shardFake) HeldOrders(_ context.Context, voucherID int64) ([]core.Order, error) {
	return q.held[voucherID], nil
}

func (q *shardFake) DeadLettersAfter(_ context.Context, after string, max int64) ([]core.DeadLetter, error) {
	from := 0
	if after != "" {
		from = slices.IndexFunc(q.dead, func(d core.DeadLetter) bool { return d.Position == after }) + 1
	}
	return q.dead[from:min(from+int(max), len(q.dead))], nil
}

func threeShards(t *testing.T) (core.Shards, []*shardFake, core.Queue) {
	t.Helper()
	shards, err := core.NewShards("a", "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	fakes := []*shardFake{newShardFake("q{a}"), newShardFake("q{b}"), newShardFake("q{c}")}
	q, err := core.ShardQueues(shards, []core.Queue{fakes[0], fakes[1], fakes[2]})
	if err != nil {
		t.Fatal(err)
	}
	return shards, fakes, q
}

func TestShardsMapVouchersInTurn(t *testing.T) {
	shards, err := core.NewShards("a", "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for v := int64(0); v < 7; v++ {
		got = append(got, shards.TagOf(v))
	}
	if want := []string{"a", "b", "c", "a", "b", "c", "a"}; !slices.Equal(got, want) {
		t.Fatalf("tags of vouchers 0..6 = %v, want %v", got, want)
	}
	if shards.Of(-4) != 2 {
		t.Fatalf("a negative id maps to shard %d, want 2 (never a negative index)", shards.Of(-4))
	}
	for _, bad := range [][]string{nil, {""}, {"a", "a"}, {"x{y}"}} {
		if _, err := core.NewShards(bad...); err == nil {
			t.Errorf("NewShards(%q) accepted", bad)
		}
	}
}

func TestShardedQueueHandsEachVoucherToItsShard(t *testing.T) {
	_, _, q := threeShards(t)
	h := core.CapabilitiesOf(q).Handoff
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[int64]string{3: "q{a}", 4: "q{b}", 5: "q{c}", 42: "q{a}"} {
		if got := h.Key(v); got != want {
			t.Errorf("voucher %d goes to %s, want %s", v, got, want)
		}
	}
}

func TestShardedQueueAddsUpAndRoutes(t *testing.T) {
	_, fakes, q := threeShards(t)
	fakes[0].stats = core.QueueStats{Depth: 1, Pending: 2, Lag: time.Second, OldestPending: 3 * time.Second, DeadLetters: 1}
	fakes[1].stats = core.QueueStats{Depth: 10, Pending: 20, Lag: 5 * time.Second, OldestPending: time.Second, DeadLetters: 0}
	fakes[2].stats = core.QueueStats{Depth: 100, Pending: 0, Lag: 0, OldestPending: 0, DeadLetters: -1}
	caps := core.CapabilitiesOf(q)
	st, err := caps.Stats.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := core.QueueStats{Depth: 111, Pending: 22, Lag: 5 * time.Second, OldestPending: 3 * time.Second, DeadLetters: -1}
	if st != want {
		t.Fatalf("stats %+v, want %+v (sums, worst times, unknown stays unknown)", st, want)
	}

	fakes[1].held[4] = []core.Order{{ID: 9, VoucherID: 4}}
	fakes[0].held[4] = []core.Order{{ID: 99, VoucherID: 4}} // not voucher 4's shard
	held, err := caps.Lister.HeldOrders(context.Background(), 4)
	if err != nil || len(held) != 1 || held[0].ID != 9 {
		t.Fatalf("held orders of voucher 4 = %v, %v; want order 9 from shard 1", held, err)
	}

	at := time.Unix(1000, 0)
	fakes[0].dead = []core.DeadLetter{{SourceID: "a1", At: at.Add(3 * time.Second)}}
	fakes[2].dead = []core.DeadLetter{{SourceID: "c1", At: at.Add(time.Second)}, {SourceID: "c2", At: at.Add(5 * time.Second)}}
	dead, err := core.ReadDeadLetters(context.Background(), caps.DeadLetters, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{dead[0].SourceID, dead[1].SourceID}; len(dead) != 2 || !slices.Equal(got, []string{"c1", "a1"}) {
		t.Fatalf("dead letters %v, want the oldest two of all shards: c1, a1", dead)
	}
	var names []string
	for _, s := range caps.DeadLetters {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"dead q{a}", "dead q{b}", "dead q{c}"}) {
		t.Fatalf("dead-letter sources %v, want each shard's", names)
	}
	if n := len(caps.Duties); n != 3 {
		t.Fatalf("%d duties, want each shard's one", n)
	}
}

func TestShardedQueueDeclaresOnlyWhatEveryShardDoes(t *testing.T) {
	shards, _ := core.NewShards("a", "b")
	a, b := newShardFake("q{a}"), newShardFake("q{b}")
	q, err := core.ShardQueues(shards, []core.Queue{a, fedOnly{b}})
	if err != nil {
		t.Fatal(err)
	}
	caps := core.CapabilitiesOf(q)
	if caps.Lister != nil {
		t.Error("a sharded queue claims to hold orders although shard 1 cannot tell")
	}
	if len(caps.DeadLetters) != 1 || caps.DeadLetters[0].Name != "dead q{a}" {
		t.Errorf("dead-letter sources %+v, want shard 0's only: shard 1 keeps none", caps.DeadLetters)
	}
	if caps.Stats == nil || caps.Shards != 2 {
		t.Errorf("stats %v, shards %d: want what both shards have, and 2", caps.Stats, caps.Shards)
	}
	if _, err := core.ShardQueues(shards, []core.Queue{a, queuetest.NewAcked()}); err == nil {
		t.Error("a queue the reservation does not feed was sharded")
	}
	if _, err := core.ShardQueues(shards, []core.Queue{a}); err == nil {
		t.Error("one queue for two shards was accepted")
	}
	one, _ := core.NewShards("a")
	if q, _ := core.ShardQueues(one, []core.Queue{a}); q != core.Queue(a) {
		t.Error("a single shard's queue is wrapped: a program's own type assertions on it would fail")
	}
}

// fedOnly is a fed queue that declares only its stats beyond the hand-off.
type fedOnly struct{ q *shardFake }

func (f fedOnly) Capabilities() core.Capabilities {
	c := f.q.Acked.Capabilities()
	c.Handoff, c.Stats = f.q.handoff(), f.q
	return c
}
func (f fedOnly) Consumer(ctx context.Context, i int) (core.Consumer, error) {
	return f.q.Consumer(ctx, i)
}
func (f fedOnly) Close() error { return nil }

// One consumer configured, three shards: the pipeline still reads every
// shard, or orders of two thirds of the vouchers would never be persisted.
func TestPipelineReadsEveryShard(t *testing.T) {
	_, fakes, q := threeShards(t)
	for i, f := range fakes {
		for n := range 50 {
			id := int64(i*100 + n + 1)
			f.Push(body(id, int64(i+1)), 1)
		}
	}
	cfg := fastConfig()
	cfg.Consumers = 1
	s := &fakeStore{}
	p := core.NewPipeline(q, s, cfg, nil, nil)
	if p.Consumers() != 3 {
		t.Fatalf("pipeline runs %d consumers, want one per shard (3)", p.Consumers())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.count() < 150 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	<-done
	if s.count() != 150 {
		t.Fatalf("%d of 150 orders persisted", s.count())
	}
	for i, f := range fakes {
		if fmt.Sprint(f.indexes) != "[0]" {
			t.Errorf("shard %d handed out consumers %v, want [0]", i, f.indexes)
		}
	}
}
