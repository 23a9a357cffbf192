package core_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

// recordingQueue wraps queuetest.Acked: it declares the guarantees it is given,
// logs the calls on its consumer in order, and fails the test if two of
// them ever overlap.
type recordingQueue struct {
	*queuetest.Acked
	guarantees core.Guarantees
	t          *testing.T
	busy       atomic.Int32
	mu         sync.Mutex
	events     []string
}

func (q *recordingQueue) Capabilities() core.Capabilities {
	return core.Capabilities{Name: "recording", Guarantees: q.guarantees}
}
func (q *recordingQueue) Consumer(context.Context, int) (core.Consumer, error) { return q, nil }

func (q *recordingQueue) enter(event string) func() {
	if q.busy.Add(1) != 1 {
		q.t.Errorf("%s overlapped another call on the same consumer", event)
	}
	q.log(event)
	return func() { q.busy.Add(-1) }
}

func (q *recordingQueue) log(event string) {
	q.mu.Lock()
	q.events = append(q.events, event)
	q.mu.Unlock()
}

func (q *recordingQueue) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	defer q.enter("fetch")()
	return q.Acked.Fetch(ctx, max)
}

func (q *recordingQueue) Ack(ctx context.Context, ds []core.Delivery) error {
	defer q.enter("ack " + ds[0].ID)()
	return q.Acked.Ack(ctx, ds)
}

// gatedStore holds each SaveOrders until the test lets it go, and fails
// the test if two run at once.
type gatedStore struct {
	fakeStore
	q       *recordingQueue
	running atomic.Int32
	gate    chan struct{}
}

func (s *gatedStore) SaveOrders(ctx context.Context, orders []core.Order) (core.SaveResult, error) {
	if s.running.Add(1) != 1 {
		s.q.t.Error("two batches of one consumer were persisted at once")
	}
	defer s.running.Add(-1)
	s.q.log("save " + strconv.FormatInt(orders[0].ID, 10))
	<-s.gate
	s.q.log("saved " + strconv.FormatInt(orders[0].ID, 10))
	return s.fakeStore.SaveOrders(ctx, orders)
}

// runGated runs a one-consumer pipeline over 4 full batches of 10 and 5
// more orders, releasing one save at a time once the pipeline is idle.
func runGated(t *testing.T, g core.Guarantees) *recordingQueue {
	q := &recordingQueue{Acked: queuetest.NewAcked(), guarantees: g, t: t}
	for id := int64(1); id <= 45; id++ {
		q.Push(body(id, 1), 1)
	}
	s := &gatedStore{q: q, gate: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		core.NewPipeline(q, s, fastConfig(), nil, nil).Run(ctx)
		close(done)
	}()
	for range 5 { // the five batches
		time.Sleep(20 * time.Millisecond) // let the consumer go as far as it can
		select {
		case s.gate <- struct{}{}:
		case <-time.After(5 * time.Second):
			t.Fatalf("no save waiting; %d persisted", s.count())
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, pending, acked, _ := q.State(); pending == 0 && acked == 45 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all acked: %d persisted", s.count())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	return q
}

// TestReadAheadOverlapsFetchWithPersist: on a queue that redelivers after a
// crash, the consumer fetches the next full batch while the previous one is
// stored, yet persists one batch at a time, acks only persisted batches,
// in order, and never calls its consumer from two goroutines.
func TestReadAheadOverlapsFetchWithPersist(t *testing.T) {
	q := runGated(t, core.Guarantees{DurableAcrossConsumerCrash: true, Acknowledged: true})
	events := slices.Clone(q.events)
	if n := fetchesBefore(events, "saved 1"); n < 2 {
		t.Fatalf("the next batch was not fetched while batch 1 was stored: %v", events)
	}
	var acks []string
	for i, e := range events {
		if id, ok := strings.CutPrefix(e, "ack "); ok {
			acks = append(acks, id)
			if !slices.Contains(events[:i], "saved "+id) {
				t.Fatalf("batch %s acked before it was persisted: %v", id, events)
			}
		}
	}
	if !slices.Equal(acks, []string{"1", "11", "21", "31", "41"}) {
		t.Fatalf("acks %v, want the five batches in order", acks)
	}
}

// TestNoReadAheadWhereACrashLosesWhatWasRead: a queue that does not
// redeliver (memory, pubsub, the plain list) is never read ahead, so a
// crash costs it one batch at most.
func TestNoReadAheadWhereACrashLosesWhatWasRead(t *testing.T) {
	q := runGated(t, core.Guarantees{Acknowledged: true})
	for i, id := range []string{"1", "11", "21", "31", "41"} {
		if n := fetchesBefore(q.events, "saved "+id); n != i+1 {
			t.Fatalf("%d fetches before batch %s was stored, want %d: %v", n, id, i+1, q.events)
		}
	}
}

// fetchesBefore counts the fetches logged before event.
func fetchesBefore(events []string, event string) int {
	end := slices.Index(events, event)
	if end < 0 {
		return -1
	}
	n := 0
	for _, e := range events[:end] {
		if e == "fetch" {
			n++
		}
	}
	return n
}
