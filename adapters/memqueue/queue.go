// Package memqueue is the BlockingQueue iteration of the classic design: a
// bounded in-process channel between the reservation and the consumers.
// It is fast and needs nothing, and it is exactly as durable as the process:
// a crash loses everything it holds. When it is full, Publish refuses at
// once (the caller releases the reservation and answers 503 busy); on a
// clean stop the pipeline drains it into the database before exit.
package memqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-lab/seckill/adapters/internal/chanbatch"
	"github.com/seckill-lab/seckill/adapters/internal/consumername"
	"github.com/seckill-lab/seckill/core"
)

// Name is the SECKILL_QUEUE value of this backend.
const Name = "memory"

// Config configures the queue. Zero values take the defaults.
type Config struct {
	// Capacity bounds the messages held. Default 10000.
	Capacity int
	// Block is how long an empty Fetch waits. Default 1s.
	Block time.Duration
	// DeadLetters is how many dead-lettered messages are kept for
	// inspection (the oldest go first). Default 1000.
	DeadLetters int
}

// Queue implements core.Queue; it is its own Publisher.
type Queue struct {
	cfg    Config
	log    *slog.Logger
	ch     chan []byte
	closed chan struct{}
	once   sync.Once
	seq    atomic.Int64

	// process names this process's consumers in their dead letters.
	process string

	mu sync.Mutex
	// dead holds encoded core.DeadLetter records, the same fields every
	// Redis backend writes to its dead-letter stream.
	dead []map[string]string
	// deadCount counts every record ever kept: the last one's position.
	deadCount int64
}

func New(cfg Config, log *slog.Logger) *Queue {
	if cfg.Capacity <= 0 {
		cfg.Capacity = 10000
	}
	if cfg.Block <= 0 {
		cfg.Block = time.Second
	}
	if cfg.DeadLetters <= 0 {
		cfg.DeadLetters = 1000
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Queue{cfg: cfg, log: log, ch: make(chan []byte, cfg.Capacity), process: consumername.Default(),
		closed: make(chan struct{})}
}

// Capabilities: orders are published after the reservation, and held in
// this process's memory only, so the pipeline drains the queue at a stop;
// a crash loses them.
func (q *Queue) Capabilities() core.Capabilities {
	return core.Capabilities{Name: Name, Guarantees: core.Guarantees{RetainsWithoutConsumer: true},
		Publisher: q, Drains: true, Stats: q,
		DeadLetters: []core.DeadLetterSource{{Name: "memory:" + q.process, Reader: q}}}
}

// ErrClosed: the queue was closed.
var ErrClosed = errors.New("memqueue: closed")

// Publish enqueues body, or returns core.ErrQueueFull at once.
func (q *Queue) Publish(_ context.Context, body []byte) error {
	select {
	case <-q.closed:
		return ErrClosed
	default:
	}
	select {
	case q.ch <- body:
		return nil
	default:
		return core.ErrQueueFull
	}
}

// Depth is the number of messages waiting.
func (q *Queue) Depth() int { return len(q.ch) }

// DeadLettersAfter returns the dead-lettered messages kept after the one
// at position after (their count since the queue was made, from 1).
func (q *Queue) DeadLettersAfter(_ context.Context, after string, limit int64) ([]core.DeadLetter, error) {
	from := int64(0)
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("memqueue: dead-letter position %q: %w", after, err)
		}
		from = n
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	first := q.deadCount - int64(len(q.dead)) + 1 // the position of q.dead[0]
	var out []core.DeadLetter
	for i := max(from+1-first, 0); i < int64(len(q.dead)) && int64(len(out)) < limit; i++ {
		d := core.DecodeDeadLetter(q.dead[i])
		d.Position = strconv.FormatInt(first+i, 10)
		out = append(out, d)
	}
	return out, nil
}
func (q *Queue) Consumer(_ context.Context, index int) (core.Consumer, error) {
	return &consumer{q: q, name: consumername.Of(q.process, index), closed: make(chan struct{})}, nil
}

// Close stops consumers and publishers. Messages still held are lost unless
// the pipeline drained them first.
func (q *Queue) Close() error {
	q.once.Do(func() { close(q.closed) })
	return nil
}

type consumer struct {
	q      *Queue
	name   string
	closed chan struct{}
	once   sync.Once
}

func (c *consumer) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	ds, err := chanbatch.Fetch(ctx, c.q.ch, c.q.closed, c.closed, c.q.cfg.Block, max, c.delivery)
	if errors.Is(err, chanbatch.ErrStopped) {
		return nil, ErrClosed
	}
	return ds, err
}

func (c *consumer) delivery(body []byte) core.Delivery {
	return core.Delivery{ID: strconv.FormatInt(c.q.seq.Add(1), 10), Body: body, Attempt: 1}
}

// Ack has nothing to do: a fetched message has already left the channel.
func (c *consumer) Ack(context.Context, []core.Delivery) error { return nil }

func (c *consumer) DeadLetter(_ context.Context, d core.Delivery, reason string) error {
	q := c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.dead) >= q.cfg.DeadLetters {
		q.dead = q.dead[1:]
	}
	q.dead = append(q.dead, core.DeadLetterOf(Name, c.name, d, reason).FieldMap())
	q.deadCount++
	q.log.Error("in-process dead letter (kept in memory only)", "body", string(d.Body), "reason", reason)
	return nil
}

func (c *consumer) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

var _ core.Queue = (*Queue)(nil)

// Stats is the queue's core.StatsReporter.
func (q *Queue) Stats(context.Context) (core.QueueStats, error) {
	s := core.UnknownStats
	s.Depth = int64(len(q.ch))
	q.mu.Lock()
	s.DeadLetters = int64(len(q.dead))
	q.mu.Unlock()
	return s, nil
}
