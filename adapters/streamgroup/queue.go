// Package streamgroup is the default queue: a Redis Stream read by a
// consumer group. The reservation script XADDs each order; consumers
// XREADGROUP in batches and XACK after the database commit. Entries a dead
// consumer held are claimed with XAUTOCLAIM once idle long enough; an entry
// delivered too often is moved to a dead-letter stream.
package streamgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/internal/consumername"
	"github.com/seckill-lab/seckill/adapters/internal/deadstream"
	"github.com/seckill-lab/seckill/adapters/internal/streamentry"
	"github.com/seckill-lab/seckill/core"
)

// Name is the SECKILL_QUEUE value of this backend.
const Name = "streamgroup"

// BodyField is the stream entry field that holds the order message.
const BodyField = streamentry.Field

// Config configures the queue. Zero values take the defaults.
type Config struct {
	// Stream is the stream key. Default "seckill:orders".
	Stream string
	// Group is the consumer group. Default "seckill-persisters".
	Group string
	// DeadLetterStream receives entries that cannot be processed.
	// Default Stream + ":dead".
	DeadLetterStream string
	// ConsumerPrefix names this process's consumers (PREFIX-0, PREFIX-1…).
	// Default: hostname, pid and a random suffix, unique per process. Set a
	// stable one (a pod name) to have a restarted process take back its own
	// pending entries at once instead of after ClaimMinIdle.
	ConsumerPrefix string
	// ClaimMinIdle: a pending entry idle this long is claimed from its
	// consumer, presumed dead. Default 30s.
	ClaimMinIdle time.Duration
	// ClaimInterval is how often a consumer looks for such entries.
	// Default ClaimMinIdle/2, at most 5s.
	ClaimInterval time.Duration
	// Liveness: a process's consumers are alive while it beats
	// (liveness.go), every Liveness/3; one that has not beaten for
	// Liveness is dead, and what its consumers held is claimed at the next
	// reap (every Liveness/6), without waiting for ClaimMinIdle. Default
	// 1.2s: a killed process's entries move within 1.5 s. A process
	// stalled past it (a pause, a Redis it cannot reach) may see its
	// entries delivered once more elsewhere: the store's idempotence
	// absorbs that.
	Liveness time.Duration
	// Block is how long one XREADGROUP waits for new entries; it bounds
	// how fast a consumer notices shutdown. Default 1s.
	Block time.Duration
	// Forgotten, if set, is told when the stream or its group has vanished
	// under the consumers (NOGROUP: deleted, or evicted by a Redis that
	// evicts keys): the entries it held are gone, and the sale's state
	// must be rebuilt (the server makes it a new incarnation:
	// redisreserve.Identity.Forget).
	Forgotten func()
	// TrimInterval is how often acknowledged entries are trimmed; entries
	// younger than TrimRetention are kept, for inspection. Defaults 10s and
	// 10m; a negative TrimRetention keeps nothing that was acknowledged.
	TrimInterval, TrimRetention time.Duration
}

func (c *Config) setDefaults() {
	if c.Stream == "" {
		c.Stream = "seckill:orders"
	}
	if c.Group == "" {
		c.Group = "seckill-persisters"
	}
	if c.DeadLetterStream == "" {
		c.DeadLetterStream = c.Stream + ":dead"
	}
	if c.ConsumerPrefix == "" {
		c.ConsumerPrefix = consumername.Default()
	}
	if c.ClaimMinIdle <= 0 {
		c.ClaimMinIdle = 30 * time.Second
	}
	if c.ClaimInterval <= 0 {
		c.ClaimInterval = min(c.ClaimMinIdle/2, 5*time.Second)
	}
	if c.Block <= 0 {
		c.Block = time.Second
	}
	if c.Liveness <= 0 {
		c.Liveness = 1200 * time.Millisecond
	}
	if c.TrimInterval <= 0 {
		c.TrimInterval = 10 * time.Second
	}
	if c.TrimRetention == 0 {
		c.TrimRetention = 10 * time.Minute
	}
}

// Queue is the stream consumer-group backend; it implements core.Queue.
type Queue struct {
	rdb redis.UniversalClient
	cfg Config
	log *slog.Logger

	claims claims // what the claimer took over, for the consumers to fetch
	held   held   // what this process's consumers fetched and have not acked
}

// New creates the group (and the stream) if missing.
func New(ctx context.Context, rdb redis.UniversalClient, cfg Config, log *slog.Logger) (*Queue, error) {
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{rdb: rdb, cfg: cfg, log: log}
	q.held.register(q.claimOwner())
	if err := q.ensureGroup(ctx); err != nil {
		return nil, err
	}
	// Alive from the start: the duty's first beat comes a period later,
	// and a stale beat of an earlier process of this name may have passed.
	if err := q.beat(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// ensureGroup creates the group from the start of the stream, so entries
// added before the first consumer ever ran are not skipped.
func (q *Queue) ensureGroup(ctx context.Context) error {
	err := q.rdb.XGroupCreateMkStream(ctx, q.cfg.Stream, q.cfg.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("streamgroup: create group %s on %s: %w", q.cfg.Group, q.cfg.Stream, err)
	}
	return nil
}

// vanished handles a stream or group found gone (NOGROUP): deleted, or
// evicted, with the orders it held. It says so (Forgotten), and recreates
// the group rather than fail for ever.
func (q *Queue) vanished(ctx context.Context) error {
	q.log.Error("consumer group missing: the stream or its group vanished with the orders it held; recreating it, and rebuilding the sale",
		"stream", q.cfg.Stream, "group", q.cfg.Group)
	if q.cfg.Forgotten != nil {
		q.cfg.Forgotten()
	}
	return q.ensureGroup(ctx)
}

// Stream is the key the reservation script XADDs to.
func (q *Queue) Stream() string { return q.cfg.Stream }

// Config returns the effective configuration.
func (q *Queue) Config() Config { return q.cfg }

// Capabilities: the reservation script feeds the stream with one XADD of
// the order under BodyField, the layout Fetch reads; the group keeps every
// delivery pending until it is acknowledged.
func (q *Queue) Capabilities() core.Capabilities {
	h := streamentry.Handoff(q.cfg.Stream)
	return core.Capabilities{
		Name: Name,
		Guarantees: core.Guarantees{
			DurableAcrossConsumerCrash: true,
			Acknowledged:               true,
			Replayable:                 true,
			CompetingConsumers:         true,
			RetainsWithoutConsumer:     true,
			CountsDeliveries:           true, // the pending entry's delivery count
		},
		Handoff: &h, Duties: q.duties(), Stats: q, Lister: q, DeadLetters: []core.DeadLetterSource{deadstream.Source(q.rdb, q.cfg.DeadLetterStream)},
	}
}

// Consumer returns consumer ConsumerPrefix-index of the group.
func (q *Queue) Consumer(_ context.Context, index int) (core.Consumer, error) {
	c := &consumer{q: q, name: consumername.Of(q.cfg.ConsumerPrefix, index)}
	q.held.register(c.name)
	return c, nil
}

// duties are the group's background work, each in a file of its own: the
// heartbeat tells that this process's consumers are alive, the reaper
// takes over at once what the consumers of a process that stopped beating
// hold (liveness.go), the claimer takes over what any consumer left
// pending past ClaimMinIdle (claim.go), the
// keeper renews what this process holds (held.go), the trimmer drops what
// every group has acknowledged (trim.go), the pruner removes the names of
// consumers that are gone (prune.go).
func (q *Queue) duties() []core.Duty {
	return []core.Duty{
		{Name: "heartbeat", Every: q.cfg.Liveness / 3, Do: q.beat},
		{Name: "claim from the dead", Every: q.cfg.Liveness / 6, Do: q.claimDead},
		{Name: "claim", Every: q.cfg.ClaimInterval, Do: q.claim},
		{Name: "prune consumers", Every: q.cfg.ClaimMinIdle, Do: q.prune},
		{Name: "keep-held", Every: q.keepHeldInterval(), Do: q.keepHeld},
		{Name: "trim", Every: q.cfg.TrimInterval, Do: func(ctx context.Context) error {
			_, err := q.Trim(ctx)
			return err
		}},
	}
}

func (q *Queue) Close() error { return nil }

type consumer struct {
	q    *Queue
	name string
	// ownDrained is set once the entries this name held before (a restart
	// under the same name) are fetched again; ownCursor is the last of them
	// fetched so far, so each comes back once even while earlier ones are
	// still held unacked (the pipeline acks batch N after fetching N+1).
	ownDrained bool
	ownCursor  string
	closed     atomic.Bool
}

// Fetch never returns an entry this process holds unacked (core.Consumer):
// its own pending entries are re-read once, after a cursor; what it fetched
// is kept from the claimer (keepHeld) until acked.
func (c *consumer) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	if c.closed.Load() {
		return nil, errors.New("streamgroup: consumer closed")
	}
	ds, err := c.fetch(ctx, max)
	c.q.held.add(c.name, ds)
	return ds, err
}

func (c *consumer) fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	if !c.ownDrained {
		ds, err := c.readOwnPending(ctx, max)
		if err != nil || len(ds) > 0 {
			return ds, err
		}
		c.ownDrained = true
	}
	if ds := c.q.takeClaimed(c.name, max); len(ds) > 0 {
		return ds, nil
	}
	ds, err := c.readNew(ctx, max)
	if err != nil {
		// XREADGROUP may have delivered entries to this name and lost the
		// reply (a connection reset, a Redis restart, a timeout): they are
		// pending under this name, and nobody claims a live consumer's.
		// Read this name's pending entries again before new ones.
		c.ownDrained, c.ownCursor = false, ""
	}
	return ds, err
}

// readNew waits up to Block for entries never delivered to the group.
func (c *consumer) readNew(ctx context.Context, max int) ([]core.Delivery, error) {
	streams, err := c.q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    c.q.cfg.Group,
		Consumer: c.name,
		Streams:  []string{c.q.cfg.Stream, ">"},
		Count:    int64(max),
		Block:    c.q.cfg.Block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
		// The stream was deleted (FLUSHALL, an operator): recreate the group
		// rather than fail forever.
		return nil, c.q.vanished(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("streamgroup: xreadgroup: %w", err)
	}
	var out []core.Delivery
	for _, s := range streams {
		for _, m := range s.Messages {
			out = append(out, delivery(m, 1))
		}
	}
	return out, nil
}

// readOwnPending re-reads entries delivered to this consumer name and never
// acked: reading from an id returns the consumer's pending entries after
// it, from 0 at first and then after the last one fetched. Entries this
// process holds are skipped: they are being worked on.
func (c *consumer) readOwnPending(ctx context.Context, max int) ([]core.Delivery, error) {
	for {
		after := c.ownCursor
		if after == "" {
			after = "0"
		}
		streams, err := c.q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group:    c.q.cfg.Group,
			Consumer: c.name,
			Streams:  []string{c.q.cfg.Stream, after},
			Count:    int64(max),
		}).Result()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
			// Gone with whatever this name had pending: nothing to re-read.
			c.ownDrained = true
			return nil, c.q.vanished(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("streamgroup: read own pending: %w", err)
		}
		var msgs []redis.XMessage
		for _, s := range streams {
			msgs = append(msgs, s.Messages...)
		}
		if len(msgs) == 0 {
			return nil, nil
		}
		c.ownCursor = msgs[len(msgs)-1].ID
		msgs = slices.DeleteFunc(msgs, func(m redis.XMessage) bool { return c.q.held.contains(m.ID) })
		if len(msgs) > 0 {
			return c.q.withAttempts(ctx, c.name, msgs)
		}
	}
}

// withAttempts looks up how often each entry was delivered (XPENDING), so
// the pipeline can dead-letter an entry that keeps coming back.
func (q *Queue) withAttempts(ctx context.Context, consumer string, msgs []redis.XMessage) ([]core.Delivery, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	pending, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: q.cfg.Stream,
		Group:  q.cfg.Group,
		Start:  msgs[0].ID,
		End:    msgs[len(msgs)-1].ID,
		// Entries this process holds may lie between them.
		Count:    int64(len(msgs) + q.held.size()),
		Consumer: consumer,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("streamgroup: xpending: %w", err)
	}
	attempts := make(map[string]int, len(pending))
	for _, p := range pending {
		attempts[p.ID] = int(p.RetryCount)
	}
	out := make([]core.Delivery, 0, len(msgs))
	for _, m := range msgs {
		n := attempts[m.ID]
		if n < 1 {
			n = 1
		}
		out = append(out, delivery(m, n))
	}
	return out, nil
}

func delivery(m redis.XMessage, attempt int) core.Delivery {
	return core.Delivery{ID: m.ID, Body: []byte(streamentry.Body(m)), Attempt: attempt}
}

// Ack acknowledges on the stream the entries were read from (the classic
// code acked a different key, leaving everything pending), in one XACK.
func (c *consumer) Ack(ctx context.Context, ds []core.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	if err := c.q.rdb.XAck(ctx, c.q.cfg.Stream, c.q.cfg.Group, ids...).Err(); err != nil {
		return fmt.Errorf("streamgroup: xack: %w", err)
	}
	c.q.held.remove(ids...)
	return nil
}

// DeadLetter copies the entry to the dead-letter stream and acks it, in one
// MULTI, so it is never both lost and acked.
func (c *consumer) DeadLetter(ctx context.Context, d core.Delivery, reason string) error {
	_, err := c.q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		deadstream.Add(ctx, p, c.q.cfg.DeadLetterStream, core.DeadLetterOf(Name, c.name, d, reason))
		p.XAck(ctx, c.q.cfg.Stream, c.q.cfg.Group, d.ID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("streamgroup: dead-letter %s: %w", d.ID, err)
	}
	c.q.held.remove(d.ID)
	return nil
}

// Close stops this consumer. Its pending entries stay in the group, to be
// re-read under the same name or claimed by another consumer once idle.
func (c *consumer) Close() error {
	c.closed.Store(true)
	c.q.held.drop(c.name)
	return nil
}

var _ core.Queue = (*Queue)(nil)

// HeldOrders reports the voucher's orders the group still owes: entries
// never delivered (after the group's last-delivered id) and entries
// delivered to some consumer and not yet acknowledged (pending).
//
// A stream or group Redis no longer has holds nothing: that is what a
// Redis that forgot the sale looks like, and what a rebuild must read.
func (q *Queue) HeldOrders(ctx context.Context, voucherID int64) ([]core.Order, error) {
	groups, err := q.rdb.XInfoGroups(ctx, q.cfg.Stream).Result()
	if isMissing(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("streamgroup: held orders: %w", err)
	}
	lastDelivered := "0-0"
	for _, g := range groups {
		if g.Name == q.cfg.Group {
			lastDelivered = g.LastDeliveredID
		}
	}
	// Never-delivered entries, a page at a time: a backlog of a whole sale
	// in one XRANGE would hold Redis, and this process's memory, at once.
	const page = 1000
	var bodies []string
	for from := "(" + lastDelivered; ; {
		queued, err := q.rdb.XRangeN(ctx, q.cfg.Stream, from, "+", page).Result()
		if err != nil {
			return nil, fmt.Errorf("streamgroup: held orders: queued: %w", err)
		}
		for _, m := range queued {
			bodies = append(bodies, streamentry.Body(m))
		}
		if len(queued) < page {
			break
		}
		from = "(" + queued[len(queued)-1].ID
	}
	// Pending entries, a page at a time, each read back by its id.
	start := "-"
	for {
		pending, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: q.cfg.Stream, Group: q.cfg.Group, Start: start, End: "+", Count: page,
		}).Result()
		if isMissing(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("streamgroup: held orders: pending: %w", err)
		}
		cmds, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, e := range pending {
				p.XRange(ctx, q.cfg.Stream, e.ID, e.ID)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("streamgroup: held orders: pending entries: %w", err)
		}
		for _, c := range cmds {
			for _, m := range c.(*redis.XMessageSliceCmd).Val() {
				bodies = append(bodies, streamentry.Body(m))
			}
		}
		if len(pending) < page {
			break
		}
		start = "(" + pending[len(pending)-1].ID
	}
	return core.OrdersOfVoucher(voucherID, bodies), nil
}

// isMissing: the stream (no such key) or its group (NOGROUP) is gone.
func isMissing(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "no such key") || strings.HasPrefix(err.Error(), "NOGROUP"))
}
