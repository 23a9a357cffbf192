// Package pubsubqueue is the Pub/Sub iteration of the classic design: the
// reservation script PUBLISHes each order and every process SUBSCRIBEs.
// Redis keeps nothing: an order published while no process is subscribed,
// or while a subscriber is disconnected or dead, is reserved in Redis and
// never persisted. The reservation counts PUBLISH calls that reached no
// subscriber (seckill_published_unheard_total); this package is here so the
// comparison can show that weakness, measured.
package pubsubqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/internal/chanbatch"
	"github.com/seckill-lab/seckill/adapters/internal/consumername"
	"github.com/seckill-lab/seckill/adapters/internal/deadstream"
	"github.com/seckill-lab/seckill/core"
)

// Name is the SECKILL_QUEUE value of this backend.
const Name = "pubsub"

// Config configures the queue. Zero values take the defaults.
type Config struct {
	// Channel the reservation publishes to. Default "seckill:orders:channel".
	Channel string
	// Buffer is how many received messages wait in the process for a
	// consumer. Default 10000. When it is full go-redis waits up to a
	// minute, then drops messages: Pub/Sub has no backpressure.
	Buffer int
	// Block is how long an empty Fetch waits. Default 1s.
	Block time.Duration
	// DeadLetterStream receives messages the pipeline gives up on.
	// Default Channel + ":dead".
	DeadLetterStream string
	// PublishOnly: this process runs no consumer (an API-only instance),
	// so it does not subscribe and receives nothing.
	PublishOnly bool
}

// Queue implements core.Queue. One subscription per process feeds all its
// consumers, so within the process each message is handled once.
type Queue struct {
	rdb  redis.UniversalClient
	cfg  Config
	log  *slog.Logger
	sub  *redis.PubSub
	msgs <-chan *redis.Message
	seq  atomic.Int64
	// process names this process's consumers in their dead letters.
	process string

	closed    chan struct{}
	closeOnce sync.Once
}

// New subscribes and returns once Redis confirmed the subscription, so no
// order published after New returns is missed by this process.
func New(ctx context.Context, rdb redis.UniversalClient, cfg Config, log *slog.Logger) (*Queue, error) {
	if cfg.Channel == "" {
		cfg.Channel = "seckill:orders:channel"
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 10000
	}
	if cfg.Block <= 0 {
		cfg.Block = time.Second
	}
	if cfg.DeadLetterStream == "" {
		cfg.DeadLetterStream = cfg.Channel + ":dead"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{rdb: rdb, cfg: cfg, log: log, process: consumername.Default(), closed: make(chan struct{})}
	if cfg.PublishOnly {
		q.msgs = make(chan *redis.Message) // never receives
		return q, nil
	}
	q.sub = rdb.Subscribe(ctx, cfg.Channel)
	if _, err := q.sub.Receive(ctx); err != nil {
		q.sub.Close()
		return nil, fmt.Errorf("pubsubqueue: subscribe %s: %w", cfg.Channel, err)
	}
	q.msgs = q.sub.Channel(redis.WithChannelSize(cfg.Buffer))
	return q, nil
}

// Capabilities: the reservation script feeds the channel with PUBLISH,
// whose reply counts the subscribers that heard the order (0: it is lost).
// No guarantees: Pub/Sub is fire-and-forget and every subscribed process
// receives every message.
func (q *Queue) Capabilities() core.Capabilities {
	return core.Capabilities{
		Name: Name,
		Handoff: &core.Handoff{
			Command:         []string{"PUBLISH", core.HandoffKey, core.HandoffBody},
			Key:             func(int64) string { return q.cfg.Channel },
			CountsReceivers: true,
		},
		Stats: q, DeadLetters: []core.DeadLetterSource{deadstream.Source(q.rdb, q.cfg.DeadLetterStream)},
	}
}

// Buffered is the number of received messages waiting for a consumer.
func (q *Queue) Buffered() int { return len(q.msgs) }

func (q *Queue) Consumer(_ context.Context, index int) (core.Consumer, error) {
	return &consumer{q: q, name: consumername.Of(q.process, index), closed: make(chan struct{})}, nil
}

// Close unsubscribes; messages received and not yet fetched are lost.
func (q *Queue) Close() error {
	var err error
	q.closeOnce.Do(func() {
		close(q.closed)
		if q.sub != nil {
			err = q.sub.Close()
		}
	})
	return err
}

type consumer struct {
	q      *Queue
	name   string // in its dead letters
	closed chan struct{}
	once   sync.Once
}

var errClosed = errors.New("pubsubqueue: closed")

func (c *consumer) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	ds, err := chanbatch.Fetch(ctx, c.q.msgs, c.q.closed, c.closed, c.q.cfg.Block, max, c.delivery)
	if errors.Is(err, chanbatch.ErrStopped) {
		return nil, errClosed
	}
	return ds, err
}

func (c *consumer) delivery(m *redis.Message) core.Delivery {
	return core.Delivery{ID: strconv.FormatInt(c.q.seq.Add(1), 10), Body: []byte(m.Payload), Attempt: 1}
}

// Ack has nothing to do: Redis forgot the message when it published it.
func (c *consumer) Ack(context.Context, []core.Delivery) error { return nil }

func (c *consumer) DeadLetter(ctx context.Context, d core.Delivery, reason string) error {
	err := deadstream.Add(ctx, c.q.rdb, c.q.cfg.DeadLetterStream, core.DeadLetterOf(Name, c.name, d, reason)).Err()
	if err != nil {
		return fmt.Errorf("pubsubqueue: dead-letter: %w", err)
	}
	return nil
}

func (c *consumer) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

var _ core.Queue = (*Queue)(nil)

// Stats is the queue's core.StatsReporter: what this process has received and
// not yet handed to a consumer, and the dead letters.
func (q *Queue) Stats(ctx context.Context) (core.QueueStats, error) {
	s := core.UnknownStats
	s.Depth = int64(len(q.msgs))
	n, err := q.rdb.XLen(ctx, q.cfg.DeadLetterStream).Result()
	if err != nil {
		return s, fmt.Errorf("pubsubqueue: stats: %w", err)
	}
	s.DeadLetters = n
	return s, nil
}
