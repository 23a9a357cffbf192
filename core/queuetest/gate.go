package queuetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/consumergate"
)

// rowCounter is an OrderStore that counts the distinct orders persisted.
type rowCounter struct {
	mu   sync.Mutex
	rows map[int64]bool
}

func (s *rowCounter) SaveOrders(_ context.Context, orders []core.Order) (core.SaveResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := core.SaveResult{}
	for _, o := range orders {
		if s.rows[o.ID] {
			res.Duplicates++
			continue
		}
		s.rows[o.ID] = true
		res.Created++
	}
	return res, nil
}

func (s *rowCounter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

// capRate and capTolerance: the conformance case's cap, and how far the
// rate persisted under it may stray (the issue's ±10 %).
const (
	capRate      = 50
	capTolerance = 0.10
)

// pausedAndCapped drives the order pipeline over the queue through a
// consumer gate, as an operator would: paused, the orders sold meanwhile
// wait in the queue and none is persisted; capped at 50 a second, the
// rate persisted holds within ±10 %; opened again, every order sold is
// persisted, none lost.
func pausedAndCapped(t *testing.T, b scope) {
	q := b.open(t)
	defer closeQueue(t, q)
	board := consumergate.NewLocal()
	gate := consumergate.New(consumergate.Config{Board: board, Truth: board, Instance: "conformance", Poll: 20 * time.Millisecond})
	rows := &rowCounter{rows: map[int64]bool{}}
	pipeline := core.NewPipeline(q, rows, core.PipelineConfig{Consumers: 3, BatchSize: 100, Gate: gate}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { _ = gate.Run(ctx) })
	wg.Go(func() { _ = pipeline.Run(ctx) })

	paused := board.Set(true, 0)
	waitFor(t, 5*time.Second, "the pause acked", func() bool { return board.Acked("conformance") == paused.Version })
	const n = 400
	published := make(chan error, 1)
	go func() { published <- sell(t, b, q, 1, n) }()
	time.Sleep(1500 * time.Millisecond)
	if got := rows.count(); got != 0 {
		t.Fatalf("%d orders persisted while the consumers were paused, want 0", got)
	}
	// The orders in the queue before the cap is measured: a publisher
	// slower than the cap (a loaded machine, a cluster) would measure
	// itself, not the cap (CI measured 45/s so once). A bounded queue
	// (memory) holds fewer than n: it is full by now, and its publisher is
	// in-process and never the slower one.
	publishedAll := false
	select {
	case err := <-published:
		if err != nil {
			t.Fatal(err)
		}
		publishedAll = true
	case <-time.After(5 * time.Second):
	}
	if got := rows.count(); got != 0 {
		t.Fatalf("%d orders persisted while the consumers were paused, want 0", got)
	}

	board.Set(false, capRate)
	time.Sleep(time.Second) // the burst of the first tenth of a second, and the read-ahead, behind us
	from, began := rows.count(), time.Now()
	time.Sleep(4 * time.Second)
	got := float64(rows.count()-from) / time.Since(began).Seconds()
	if got < capRate*(1-capTolerance) || got > capRate*(1+capTolerance) {
		t.Fatalf("capped at %d a second, %.1f persisted a second (want within ±%.0f %%)", capRate, got, capTolerance*100)
	}
	t.Logf("%s: capped at %d/s, %.1f persisted a second", core.CapabilitiesOf(q).Name, capRate, got)

	board.Set(false, 0)
	if !publishedAll {
		if err := <-published; err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "every order persisted after the cap was lifted", func() bool { return rows.count() == n })
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
