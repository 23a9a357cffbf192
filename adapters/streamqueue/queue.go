// Package streamqueue is the Stream iteration of the classic design before
// consumer groups: the reservation script XADDs each order, and consumers
// XREAD BLOCK from a cursor. The cursor is saved in Redis after each
// persisted batch, so a restarted process resumes where it left off and
// re-reads what it had not persisted.
//
// There are no consumer groups: every process (every reader name) reads the
// whole stream. Running several processes means every order is persisted by
// each of them — the idempotent store absorbs the copies, but the work is
// repeated, not shared. Within one process, the consumers share one cursor.
package streamqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/internal/deadstream"
	"github.com/seckill-lab/seckill/adapters/internal/streamentry"
	"github.com/seckill-lab/seckill/adapters/internal/streamid"
	"github.com/seckill-lab/seckill/core"
)

// Name is the SECKILL_QUEUE value of this backend.
const Name = "stream"

// BodyField is the stream entry field that holds the order message.
const BodyField = streamentry.Field

// Config configures the queue. Zero values take the defaults.
type Config struct {
	// Stream is the stream key. Default "seckill:orders:stream".
	Stream string
	// Reader names this process's cursor. Default "seckill". Processes
	// meant to read independently need different names; a restarted
	// process must keep its name to resume.
	Reader string
	// Block is how long one XREAD waits. Default 1s.
	Block time.Duration
	// DeadLetterStream receives messages the pipeline gives up on.
	// Default Stream + ":dead".
	DeadLetterStream string
	// TrimInterval is how often entries every reader has passed are
	// trimmed; entries younger than TrimRetention are kept. Defaults 10s and
	// 10m; a negative TrimRetention keeps nothing every reader passed.
	TrimInterval, TrimRetention time.Duration
}

// Queue implements core.Queue.
type Queue struct {
	rdb redis.UniversalClient
	cfg Config
	log *slog.Logger

	readMu sync.Mutex // one XREAD at a time: the consumers share the cursor
	next   string     // where the next XREAD starts (exclusive)

	mu       sync.Mutex
	inflight []string        // ids read and not yet acked, in stream order
	done     map[string]bool // acked ids still behind an unacked one
	saved    string          // the cursor last saved to Redis

	closed    chan struct{}
	closeOnce sync.Once
}

// New loads the reader's saved cursor; without one it starts at the
// beginning of the stream, so nothing published before is skipped.
func New(ctx context.Context, rdb redis.UniversalClient, cfg Config, log *slog.Logger) (*Queue, error) {
	if cfg.Stream == "" {
		cfg.Stream = "seckill:orders:stream"
	}
	if cfg.Reader == "" {
		cfg.Reader = "seckill"
	}
	if cfg.Block <= 0 {
		cfg.Block = time.Second
	}
	if cfg.DeadLetterStream == "" {
		cfg.DeadLetterStream = cfg.Stream + ":dead"
	}
	if cfg.TrimInterval <= 0 {
		cfg.TrimInterval = 10 * time.Second
	}
	if cfg.TrimRetention == 0 {
		cfg.TrimRetention = 10 * time.Minute
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{rdb: rdb, cfg: cfg, log: log, done: map[string]bool{}, closed: make(chan struct{})}
	cursor, err := rdb.HGet(ctx, q.cursorsKey(), cfg.Reader).Result()
	switch {
	case errors.Is(err, redis.Nil):
		cursor = "0-0"
	case err != nil:
		return nil, fmt.Errorf("streamqueue: load cursor: %w", err)
	}
	q.next, q.saved = cursor, cursor
	return q, nil
}

func (q *Queue) cursorsKey() string { return q.cfg.Stream + ":cursors" }

// Stream is the key the reservation script XADDs to.
func (q *Queue) Stream() string { return q.cfg.Stream }

// Cursor is the id up to which this reader has persisted everything.
func (q *Queue) Cursor() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.saved
}

// Capabilities: the reservation script feeds the stream with one XADD of
// the order under BodyField, the layout Fetch reads; the trimmer is its
// duty.
func (q *Queue) Capabilities() core.Capabilities {
	h := streamentry.Handoff(q.cfg.Stream)
	return core.Capabilities{
		Name: Name,
		Guarantees: core.Guarantees{
			DurableAcrossConsumerCrash: true, // a restart re-reads from the saved cursor
			Acknowledged:               true, // the saved cursor is the acknowledgement
			Replayable:                 true,
			RetainsWithoutConsumer:     true,
		},
		Handoff: &h, Duties: q.duties(), Stats: q, Lister: q, DeadLetters: []core.DeadLetterSource{deadstream.Source(q.rdb, q.cfg.DeadLetterStream)},
	}
}

func (q *Queue) Consumer(context.Context, int) (core.Consumer, error) {
	return &consumer{q: q, closed: make(chan struct{})}, nil
}

// Close stops the consumers; the cursor stays where the last ack left it.
func (q *Queue) Close() error {
	q.closeOnce.Do(func() { close(q.closed) })
	return nil
}

var errClosed = errors.New("streamqueue: closed")

func (q *Queue) read(ctx context.Context, max int) ([]core.Delivery, error) {
	q.readMu.Lock()
	defer q.readMu.Unlock()
	select {
	case <-q.closed:
		return nil, errClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	streams, err := q.rdb.XRead(ctx, &redis.XReadArgs{
		Streams: []string{q.cfg.Stream, q.next}, Count: int64(max), Block: q.cfg.Block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("streamqueue: xread: %w", err)
	}
	var out []core.Delivery
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range streams {
		for _, m := range s.Messages {
			out = append(out, core.Delivery{ID: m.ID, Body: []byte(streamentry.Body(m)), Attempt: 1})
			q.inflight = append(q.inflight, m.ID)
			q.next = m.ID
		}
	}
	return out, nil
}

// settle marks ids done and saves the cursor past the longest run of done
// ids at the front: never past an id some consumer still holds.
func (q *Queue) settle(ctx context.Context, ids []string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		q.done[id] = true
	}
	advanced := ""
	for len(q.inflight) > 0 && q.done[q.inflight[0]] {
		advanced = q.inflight[0]
		delete(q.done, advanced)
		q.inflight = q.inflight[1:]
	}
	if advanced == "" {
		return nil
	}
	if err := q.rdb.HSet(ctx, q.cursorsKey(), q.cfg.Reader, advanced).Err(); err != nil {
		return fmt.Errorf("streamqueue: save cursor: %w", err)
	}
	q.saved = advanced
	return nil
}

func (q *Queue) duties() []core.Duty {
	return []core.Duty{{Name: "trim", Every: q.cfg.TrimInterval, Do: func(ctx context.Context) error {
		_, err := q.Trim(ctx)
		return err
	}}}
}

// Trim drops entries every known reader has passed and that are older than
// TrimRetention. A reader's cursor protects what it has not persisted; a
// reader that stopped for good keeps holding the stream back until its
// field is removed from the cursors hash.
func (q *Queue) Trim(ctx context.Context) (int64, error) {
	cursors, err := q.rdb.HGetAll(ctx, q.cursorsKey()).Result()
	if err != nil {
		return 0, fmt.Errorf("streamqueue: cursors: %w", err)
	}
	if len(cursors) == 0 {
		return 0, nil
	}
	bound := ""
	for _, c := range cursors {
		if bound == "" || streamid.Less(c, bound) {
			bound = c
		}
	}
	if q.cfg.TrimRetention > 0 {
		if byAge := streamid.At(time.Now().Add(-q.cfg.TrimRetention)); streamid.Less(byAge, bound) {
			bound = byAge
		}
	}
	n, err := q.rdb.XTrimMinID(ctx, q.cfg.Stream, bound).Result()
	if err != nil {
		return 0, fmt.Errorf("streamqueue: xtrim: %w", err)
	}
	return n, nil
}

type consumer struct {
	q      *Queue
	closed chan struct{}
	once   sync.Once
}

func (c *consumer) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	select {
	case <-c.closed:
		return nil, errClosed
	default:
	}
	return c.q.read(ctx, max)
}

func (c *consumer) Ack(ctx context.Context, ds []core.Delivery) error {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return c.q.settle(ctx, ids)
}

func (c *consumer) DeadLetter(ctx context.Context, d core.Delivery, reason string) error {
	err := deadstream.Add(ctx, c.q.rdb, c.q.cfg.DeadLetterStream, core.DeadLetterOf(Name, c.q.cfg.Reader, d, reason)).Err()
	if err != nil {
		return fmt.Errorf("streamqueue: dead-letter: %w", err)
	}
	return c.q.settle(ctx, []string{d.ID})
}

func (c *consumer) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

var _ core.Queue = (*Queue)(nil)

// Stats is the queue's core.StatsReporter. Lag is the time between the newest
// entry and this reader's cursor; Pending is what the process holds; Depth
// the entries after the saved cursor that it does not hold, counted up to
// depthCountCap.
func (q *Queue) Stats(ctx context.Context) (core.QueueStats, error) {
	s := core.UnknownStats
	last, err := q.rdb.XRevRangeN(ctx, q.cfg.Stream, "+", "-", 1).Result()
	if err != nil {
		return s, fmt.Errorf("streamqueue: stats: %w", err)
	}
	dead, err := q.rdb.XLen(ctx, q.cfg.DeadLetterStream).Result()
	if err != nil {
		return s, fmt.Errorf("streamqueue: stats: %w", err)
	}
	s.DeadLetters = dead
	q.mu.Lock()
	s.Pending = int64(len(q.inflight))
	if len(q.inflight) > 0 {
		s.OldestPending = time.Since(streamid.Time(q.inflight[0]))
	}
	cursor := q.saved
	q.mu.Unlock()
	after, err := q.rdb.XRangeN(ctx, q.cfg.Stream, "("+cursor, "+", depthCountCap).Result()
	if err != nil {
		return s, fmt.Errorf("streamqueue: stats: %w", err)
	}
	s.Lag = 0
	if len(last) == 1 && streamid.Less(cursor, last[0].ID) {
		from := cursor
		if streamid.Time(cursor).UnixMilli() == 0 && len(after) > 0 {
			from = after[0].ID // nothing read yet: from the first entry, not from 1970
		}
		s.Lag = streamid.Time(last[0].ID).Sub(streamid.Time(from))
	}
	s.Depth = max(int64(len(after))-s.Pending, 0)
	return s, nil
}

// depthCountCap bounds the entries Stats counts for Depth.
const depthCountCap = 10000

// HeldOrders reports the voucher's orders past this reader's saved cursor:
// queued, or read and not yet persisted. Those at or before it are in the
// database.
func (q *Queue) HeldOrders(ctx context.Context, voucherID int64) ([]core.Order, error) {
	cursor, err := q.rdb.HGet(ctx, q.cursorsKey(), q.cfg.Reader).Result()
	if errors.Is(err, redis.Nil) {
		cursor = "0-0"
	} else if err != nil {
		return nil, fmt.Errorf("streamqueue: held orders: cursor: %w", err)
	}
	msgs, err := q.rdb.XRange(ctx, q.cfg.Stream, "("+cursor, "+").Result()
	if err != nil {
		return nil, fmt.Errorf("streamqueue: held orders: %w", err)
	}
	bodies := make([]string, 0, len(msgs))
	for _, m := range msgs {
		bodies = append(bodies, streamentry.Body(m))
	}
	return core.OrdersOfVoucher(voucherID, bodies), nil
}
