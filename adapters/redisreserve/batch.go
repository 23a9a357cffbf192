package redisreserve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-lab/seckill/adapters/internal/batchspan"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// Batched reservations (Config.Batch): the reservations of one shard that
// arrive while that shard's previous call is in flight wait for it and go
// together in the next call of seckill_batch.lua. No timer: a reservation
// that finds nothing in flight is sent at once, so a lone shopper waits no
// longer than with one call each, and a batch is as large as what arrived
// during one call (at most Config.Batch). Redis then parses, looks up and
// sets up one script per batch rather than per shopper.
//
// One call in flight per shard carries at most Config.Batch reservations a
// round trip: with Redis 200 ms away that was ~140 a second, below the 150
// offered, and the wait grew without bound (p99 1.24 s, against 0.46 s
// with a call each). So while a whole batch or more waits behind the calls
// in flight, another call goes out, up to maxCallsInFlight: under latency
// the calls overlap, and on a near Redis, where a call is back before a
// batch's worth arrives, one is in flight as before (measured: a second
// call in flight whatever the queue made batches smaller and cost Redis
// more per order, docs/performance.md).

var seckillBatchScript = redis.NewScript(lua.SeckillBatch)

// batchArgs is how many ARGV are a member's own: seckill.lua's shopper,
// order id, body and deadline, and the entry its payment deadline gets in
// the deadlines list. The rest is the shopper's limit (the same for the
// call's members) and the hand-off command, sent once per call.
const batchArgs = 5

// batchRetry bounds the backoff between replays of a batch whose call
// failed as a whole.
const (
	batchRetryFirst = 10 * time.Millisecond
	batchRetryMax   = 200 * time.Millisecond
	// batchTriesWithoutDeadline: a batch none of whose members has a
	// deadline is replayed this many times at most.
	batchTriesWithoutDeadline = 3
)

// maxCallsInFlight bounds a shard's calls in flight when the queue keeps a
// whole batch waiting.
const maxCallsInFlight = 4

// batcher gathers one shard's reservations.
type batcher struct {
	r     *sale
	mu    sync.Mutex
	queue []*batchMember
	// sending counts the drains running, each with a call in flight or
	// about to send one.
	sending int
}

// batchMember is one reservation waiting in a batch, and where its answer
// goes.
type batchMember struct {
	ctx  context.Context
	done chan batchAnswer
	// seckill.lua's KEYS[1], [2], [3] and [5]: the member's own.
	stock, window, orders, limit string
	// seckill.lua's KEYS[4] and [6], the queue and deadlines keys of the
	// shard, and ARGV[4], the shopper's limit: sent once per call.
	queue, payBy string
	rate         int
	// seckill.lua's ARGV[1..3] and [5], and the entry of the payment
	// deadline: sent by pointer, which go-redis writes without boxing
	// each value in an interface (an allocation each).
	userID, orderID int64
	body            string
	deadline        int64
	due             string
}

type batchAnswer struct {
	res         core.Reservation
	unconfirmed bool // WAIT mode: the batch's WAIT fell short
	err         error
}

// batcherOf is the batcher of a shard.
func (r *sale) batcherOf(shard int) *batcher {
	r.batchersMu.Lock()
	defer r.batchersMu.Unlock()
	if r.batchers == nil {
		r.batchers = map[int]*batcher{}
	}
	b, ok := r.batchers[shard]
	if !ok {
		b = &batcher{r: r}
		r.batchers[shard] = b
	}
	return b
}

// reserveBatched hands the reservation to its shard's batcher and waits
// for its answer, or for ctx (a batch under way goes on: the script finds
// the deadline passed and reserves nothing, or reserves and the shopper's
// retry is answered by the replay branch).
func (r *sale) reserveBatched(ctx context.Context, o core.Order, bk BucketKeys) (core.Reservation, error) {
	m := r.newBatchMember(ctx, o, bk)
	r.batcherOf(bk.Shard).add(m)
	select {
	case a := <-m.done:
		if a.err != nil {
			return core.Reservation{}, a.err
		}
		a.res.Unconfirmed = a.unconfirmed && a.res.Result == core.Reserved
		return a.res, nil
	case <-ctx.Done():
		return core.Reservation{}, fmt.Errorf("redisreserve: batched reservation: %w", ctx.Err())
	}
}

// newBatchMember lays out the order's keys and arguments as the batch
// script takes a member's: scriptArgs' values, without its slices.
func (r *sale) newBatchMember(ctx context.Context, o core.Order, bk BucketKeys) *batchMember {
	rate, deadline, payBy := r.terms(ctx, o)
	var body [128]byte
	return &batchMember{ctx: ctx, done: make(chan batchAnswer, 1),
		stock: bk.Stock, window: bk.Window, orders: bk.Orders, limit: bk.Limit(o.UserID),
		queue: r.queueKey(o.VoucherID, bk), payBy: r.payBy(bk.Shard), rate: rate,
		userID: o.UserID, orderID: o.ID, body: string(r.cfg.OrderBody.Append(body[:0], o)), deadline: deadline,
		due: deadlineEntry(payBy, o)}
}

func (b *batcher) add(m *batchMember) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = append(b.queue, m)
	if b.sending == 0 || (len(b.queue) >= b.r.cfg.Batch && b.sending < maxCallsInFlight) {
		b.sending++
		go b.drain()
	}
}

// drain sends batches while reservations wait, one call at a time; other
// drains may run beside it while a whole batch waits (add).
func (b *batcher) drain() {
	for {
		batch := b.next()
		if batch == nil {
			return
		}
		b.send(batch)
	}
}

// next takes the next batch off the queue, answering the members whose
// context ended while they waited (they are not sent); nil once the
// queue is empty, and then the batcher stops sending. A batch's members
// share the queue and deadlines keys, sent once: a shard's are the same
// for all (without a hand-off the queue key is a member's own, untouched),
// but a member that named others would start the next batch.
func (b *batcher) next() []*batchMember {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*batchMember
	for len(b.queue) > 0 && len(batch) < b.r.cfg.Batch {
		m := b.queue[0]
		if len(batch) > 0 && (m.payBy != batch[0].payBy || m.rate != batch[0].rate ||
			len(b.r.handoffArgs) > 0 && m.queue != batch[0].queue) {
			break
		}
		b.queue[0] = nil
		b.queue = b.queue[1:]
		if err := m.ctx.Err(); err != nil {
			m.done <- batchAnswer{err: fmt.Errorf("redisreserve: batched reservation: %w", err)}
			continue
		}
		batch = append(batch, m)
	}
	if len(batch) == 0 {
		b.sending--
		if b.sending == 0 {
			b.queue = nil
		}
		return nil
	}
	return batch
}

// send runs one batch and answers its members. A call that fails as a
// whole (a timeout, a lost connection, a failover) is replayed with the
// same order ids, which the script's replay branch makes safe, while a
// member is still waiting; a member whose wait ends first, or a batch that
// never got through, is told its order id and that its reservation is
// unconfirmed (it may have been made), never a bare error.
func (b *batcher) send(batch []*batchMember) {
	r := b.r
	keys := make([]string, 0, 2+4*len(batch))
	keys = append(keys, batch[0].queue, batch[0].payBy)
	args := make([]any, 0, 4+len(r.handoffArgs)+batchArgs*len(batch))
	whole := 1
	if r.noEviction.Load() {
		whole = 0
	}
	args = append(args, len(batch), len(r.handoffArgs), batch[0].rate, whole)
	args = append(args, r.handoffArgs...)
	for _, m := range batch {
		keys = append(keys, m.stock, m.window, m.orders, m.limit)
		args = append(args, &m.userID, &m.orderID, &m.body, &m.deadline, &m.due)
	}
	span := r.traceBatch(batch)
	if span != nil {
		defer span.End()
	}
	wait := batchRetryFirst
	for try := 1; ; try++ {
		ctx, cancel := batchContext(batch)
		if span != nil {
			ctx = trace.ContextWithSpan(ctx, span)
		}
		replies, confirmed, err := r.runBatch(ctx, keys, args)
		cancel()
		if err != nil && span != nil {
			span.RecordError(err)
		}
		if err == nil {
			b.answer(batch, replies, confirmed)
			return
		}
		r.log().Warn("redisreserve: a batch of reservations failed; replaying it", "members", len(batch), "try", try, "err", err)
		if !batchWaiting(batch) || (!batchHasDeadline(batch) && try >= batchTriesWithoutDeadline) {
			for _, m := range batch {
				m.done <- batchAnswer{err: fmt.Errorf("redisreserve: batched reservation: %w",
					&core.UnconfirmedError{OrderID: m.orderID})}
			}
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, batchRetryMax)
	}
}

// traceBatch is the span of a batch's call (batchspan's rule; nil where
// no member's request was sampled: no work at all).
func (r *sale) traceBatch(batch []*batchMember) trace.Span {
	members := make([]trace.SpanContext, len(batch))
	for i, m := range batch {
		members[i] = trace.SpanContextFromContext(m.ctx)
	}
	_, span := batchspan.Start(context.Background(), r.cfg.Tracer, "seckill batch", members, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.Int("seckill.batch.members", len(batch))))
	return span
}

// batchContext is the call's context: it ends with the last member's
// deadline (no member waits longer), and has none if a member has none.
func batchContext(batch []*batchMember) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, m := range batch {
		d, ok := m.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(context.Background(), last)
}

func batchWaiting(batch []*batchMember) bool {
	for _, m := range batch {
		if m.ctx.Err() == nil {
			return true
		}
	}
	return false
}

func batchHasDeadline(batch []*batchMember) bool {
	for _, m := range batch {
		if _, ok := m.ctx.Deadline(); ok {
			return true
		}
	}
	return false
}

// runBatch runs the batch script; in WAIT mode followed by WAIT on the same
// connection, whose count it returns (-1 without WAIT).
func (r *sale) runBatch(ctx context.Context, keys []string, args []any) ([]any, int64, error) {
	if r.cfg.WaitReplicas <= 0 {
		res, err := seckillBatchScript.Run(ctx, r.rdb, keys, args...).Slice()
		return res, -1, err
	}
	res, confirmed, err := r.runThenWait(ctx, seckillBatchScript, keys, args)
	if err != nil {
		return nil, 0, err
	}
	replies, err := res.Slice()
	if err != nil {
		return nil, 0, err
	}
	return replies, confirmed, nil
}

// answer fans the batch's replies out to its members: three values each,
// in one flat array (seckill_batch.lua's header).
func (b *batcher) answer(batch []*batchMember, replies []any, confirmed int64) {
	unconfirmed := confirmed >= 0 && confirmed < int64(b.r.cfg.WaitReplicas)
	for i, m := range batch {
		if 3*i+3 > len(replies) {
			m.done <- batchAnswer{err: fmt.Errorf("redisreserve: batch script returned %d values for %d members", len(replies), len(batch))}
			continue
		}
		reply := replies[3*i : 3*i+3]
		if code, _ := reply[0].(int64); code == -1 {
			msg, _ := reply[1].(string)
			m.done <- batchAnswer{err: fmt.Errorf("redisreserve: seckill script: %w", errors.New(msg))}
			continue
		}
		res, err := b.r.parseReservation(reply)
		m.done <- batchAnswer{res: res, unconfirmed: unconfirmed, err: err}
	}
}
