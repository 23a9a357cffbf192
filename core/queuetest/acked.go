package queuetest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Acked is an in-memory acknowledged queue for tests of what runs over a
// queue (the pipeline, the relay): fetched deliveries stay pending until
// acked or dead-lettered.
type Acked struct {
	mu      sync.Mutex
	ready   []core.Delivery
	pending map[string]core.Delivery
	acked   []string
	dead    map[string]string // delivery id -> reason
	seq     int
}

func NewAcked() *Acked {
	return &Acked{pending: map[string]core.Delivery{}, dead: map[string]string{}}
}

func (q *Acked) Push(body []byte, attempt int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	q.ready = append(q.ready, core.Delivery{ID: fmt.Sprint(q.seq), Body: body, Attempt: attempt})
}

func (q *Acked) Capabilities() core.Capabilities {
	return core.Capabilities{Name: "fake", Guarantees: core.Guarantees{Acknowledged: true}}
}
func (q *Acked) Consumer(context.Context, int) (core.Consumer, error) { return q, nil }
func (q *Acked) Close() error                                         { return nil }

func (q *Acked) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	q.mu.Lock()
	n := min(max, len(q.ready))
	ds := append([]core.Delivery(nil), q.ready[:n]...)
	q.ready = q.ready[n:]
	for _, d := range ds {
		q.pending[d.ID] = d
	}
	q.mu.Unlock()
	if n == 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return ds, nil
}

func (q *Acked) Ack(_ context.Context, ds []core.Delivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, d := range ds {
		delete(q.pending, d.ID)
		q.acked = append(q.acked, d.ID)
	}
	return nil
}

func (q *Acked) DeadLetter(_ context.Context, d core.Delivery, reason string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.pending, d.ID)
	q.dead[d.ID] = reason
	return nil
}

func (q *Acked) State() (ready, pending, acked, dead int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ready), len(q.pending), len(q.acked), len(q.dead)
}

// DeadReasons is each dead-lettered delivery's reason, by delivery id.
func (q *Acked) DeadReasons() map[string]string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return maps.Clone(q.dead)
}
