// Package relay feeds an outside broker from the outbox the reservation
// writes: the transactional outbox of docs/architecture.md (New).
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/seckill-lab/seckill/core"
)

// Config configures New. Zero values take the defaults.
type Config struct {
	// Batch is how many outbox entries a relay reads and forwards at once.
	// Default 256.
	Batch int
	// RetryInitial and RetryMax bound the backoff between forwards of a
	// batch the broker did not confirm. Defaults 100ms and 5s.
	RetryInitial, RetryMax time.Duration
	// FinishTimeout bounds the batch in flight at a stop: it is forwarded
	// and acked for this much longer, so a clean stop leaves nothing for
	// another relay to claim. Default 5s.
	FinishTimeout time.Duration
	// OutboxCap bounds the orders waiting in the outbox (unread, or read
	// and not yet confirmed by the broker): at the cap, shoppers are
	// answered 503 busy before anything is reserved, so a broker that is
	// down fills neither Redis nor the shoppers' hopes. 0: no cap.
	OutboxCap int64
	// IntakeEvery is how often the outbox's backlog is read again for the
	// cap (each instance reads it at most this often). Default 500ms.
	IntakeEvery time.Duration
	Log         *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Batch <= 0 {
		c.Batch = 256
	}
	if c.RetryInitial <= 0 {
		c.RetryInitial = 100 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Second
	}
	if c.FinishTimeout <= 0 {
		c.FinishTimeout = 5 * time.Second
	}
	if c.IntakeEvery <= 0 {
		c.IntakeEvery = 500 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// New joins an outbox the reservation feeds (a Redis stream read by a
// consumer group, one per shard) and an outside broker (a queue that
// declares a Forwarder) into one Queue: the transactional outbox of
// docs/architecture.md. The reservation script hands each order to the
// outbox in its own atomic step (the outbox's Handoff); relays, one per
// shard in every process that runs consumers (a Duty each), read the
// outbox, forward to the broker, and ack the outbox only after the broker
// confirmed; the consumers read the broker. A relay killed mid-batch leaves
// its entries pending in the outbox, where another claims them: the
// broker may see an order twice, never zero times.
//
// The join is the broker as its consumers and outside readers see it (its
// name, guarantees, consumers), fed like the outbox. Its held orders are
// the outbox's then the broker's (read in the direction orders flow, so
// one moving between them is seen at least once), when both can list
// theirs; its stats count what waits in either; its dead letters are
// both's.
func New(outbox, broker core.Queue, cfg Config) (core.Queue, error) {
	cfg.setDefaults()
	oc, bc := core.CapabilitiesOf(outbox), core.CapabilitiesOf(broker)
	switch {
	case oc.Handoff == nil:
		return nil, fmt.Errorf("relay: the outbox %s is not fed by the reservation", oc.Name)
	case !oc.Guarantees.Acknowledged || !oc.Guarantees.DurableAcrossConsumerCrash:
		return nil, fmt.Errorf("relay: the outbox %s must keep what a relay read until it is acked, also across a crash", oc.Name)
	case bc.Forwarder == nil:
		return nil, fmt.Errorf("relay: %s declares no Forwarder: it is not an outside broker", bc.Name)
	}
	return &relayed{outbox: outbox, broker: broker, oc: oc, bc: bc, cfg: cfg,
		relaying: make([]atomic.Bool, oc.Shards)}, nil
}

type relayed struct {
	outbox, broker core.Queue
	oc, bc         core.Capabilities
	cfg            Config

	forwarded, failures atomic.Int64
	lastError           atomic.Pointer[string]
	// inFlight counts the orders this process's relays read from the
	// outbox and the broker has not confirmed yet.
	inFlight atomic.Int64
	// relaying marks each shard whose relay runs in this process.
	relaying []atomic.Bool

	// intakeMu is held by the one caller reading the backlog again;
	// backlog is the last read (-1 before any) and backlogAt its time.
	intakeMu  sync.Mutex
	backlog   atomic.Int64
	backlogAt atomic.Int64 // unix nanoseconds
}

func (r *relayed) Capabilities() core.Capabilities {
	c := core.Capabilities{
		Name:       r.bc.Name,
		Guarantees: r.bc.Guarantees,
		Handoff:    r.oc.Handoff,
		Shards:     r.oc.Shards,
		Relay:      r,
	}
	if r.cfg.OutboxCap > 0 && r.oc.Stats != nil {
		c.Intake = r
	}
	c.Duties = append(c.Duties, r.oc.Duties...)
	c.Duties = append(c.Duties, r.bc.Duties...)
	for shard := range r.oc.Shards {
		c.Duties = append(c.Duties, core.Duty{
			Name:  fmt.Sprintf("relay shard %d", shard),
			Every: 10 * time.Millisecond,
			Do:    func(ctx context.Context) error { return r.relay(ctx, shard) },
		})
	}
	if r.oc.Stats != nil && r.bc.Stats != nil {
		c.Stats = core.StatsFunc(r.stats)
	}
	if r.oc.Holder != nil && r.bc.Holder != nil {
		c.Lister, c.BucketLister = core.HeldBucketsFunc(r.heldOrders), core.HeldBucketsFunc(r.heldOrders)
	} else if r.bc.Holding != nil {
		c.Holding = holdingFunc(r.holding)
	}
	c.DeadLetters = append(slices.Clone(r.bc.DeadLetters), r.oc.DeadLetters...)
	return c
}

func (r *relayed) Consumer(ctx context.Context, index int) (core.Consumer, error) {
	return r.broker.Consumer(ctx, index)
}

func (r *relayed) Close() error { return errors.Join(r.outbox.Close(), r.broker.Close()) }

// relay moves the outbox of one shard to the broker until ctx ends. It
// runs as a Duty whose run lasts until the stop; a failure is counted and
// retried here, so the duty never ends early.
func (r *relayed) relay(ctx context.Context, shard int) error {
	// One relay per shard in a process, however many times the queue's
	// duties are started (two pipelines on one queue): two would read the
	// shard's outbox under one consumer name, each re-reading its pending
	// entries, and forward them twice.
	if !r.relaying[shard].CompareAndSwap(false, true) {
		return nil
	}
	defer r.relaying[shard].Store(false)
	// The outbox join routes consumer i to shard i mod the count.
	c, err := r.outbox.Consumer(ctx, shard)
	if err != nil {
		r.failed(err)
		return fmt.Errorf("relay shard %d: %w", shard, err)
	}
	defer c.Close()
	retry := r.newBackoff()
	for ctx.Err() == nil {
		ds, err := c.Fetch(ctx, r.cfg.Batch)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			r.failed(err)
			r.cfg.Log.Warn("relay: reading the outbox failed", "queue", r.bc.Name, "shard", shard, "err", err)
			sleepCtx(ctx, retry.NextBackOff())
			continue
		}
		retry.Reset()
		if len(ds) == 0 {
			continue
		}
		r.move(ctx, c, ds)
	}
	return nil
}

// move forwards one batch and acks it on the outbox. An entry that does
// not decode is dead-lettered on the outbox (no broker could carry it to a
// consumer that would store it); the rest are forwarded until the broker
// confirms them: for as long as it takes while the process runs, and for
// FinishTimeout more once stop is done (a clean stop leaves nothing
// pending for another relay to claim). Given up at a stop, they stay
// pending in the outbox, for this name's restart or another's claim.
// forward is one attempt to have the broker confirm orders (in its span
// where the server traces: a wrapper of the broker's Forwarder).
func (r *relayed) forward(work context.Context, orders []core.Order) error {
	ctx, cancel := context.WithTimeout(work, forwardTimeout)
	defer cancel()
	return r.bc.Forwarder.Forward(ctx, orders)
}

func (r *relayed) move(stop context.Context, c core.Consumer, ds []core.Delivery) {
	// work outlives stop by the grace, however long an attempt in flight
	// at the stop would have taken.
	work, cancel := context.WithCancel(context.WithoutCancel(stop))
	defer cancel()
	graceTimer := make(chan *time.Timer, 1)
	unhook := context.AfterFunc(stop, func() { graceTimer <- time.AfterFunc(r.cfg.FinishTimeout, cancel) })
	defer func() {
		if !unhook() {
			(<-graceTimer).Stop()
		}
	}()
	gaveUp := func() bool { return work.Err() != nil }
	orders := make([]core.Order, 0, len(ds))
	good := ds[:0:0]
	for _, d := range ds {
		o, err := core.DecodeOrder(d.Body)
		if err != nil {
			if err := c.DeadLetter(work, d, string(core.DeadLetterPoison)); err != nil {
				r.failed(err)
			}
			continue
		}
		orders, good = append(orders, o), append(good, d)
	}
	if len(orders) == 0 {
		return
	}
	r.inFlight.Add(int64(len(orders)))
	confirmed := false
	defer func() {
		if !confirmed {
			r.inFlight.Add(-int64(len(orders)))
		}
	}()
	retry := r.newBackoff()
	for {
		err := r.forward(work, orders)
		if err == nil {
			confirmed = true
			r.inFlight.Add(-int64(len(orders)))
			break
		}
		r.failed(err)
		r.cfg.Log.Warn("relay: the broker did not confirm a batch; forwarding it again", "queue", r.bc.Name, "orders", len(orders), "err", err)
		if gaveUp() {
			return
		}
		pause(stop, retry.NextBackOff())
	}
	r.forwarded.Add(int64(len(orders)))
	r.lastError.Store(nil)
	for {
		actx, cancel := context.WithTimeout(work, forwardTimeout)
		err := c.Ack(actx, good)
		cancel()
		if err == nil {
			return
		}
		// Unacked, the entries are forwarded again later: a duplicate the
		// broker or the store absorbs, never a loss.
		r.failed(err)
		if gaveUp() {
			return
		}
		pause(stop, retry.NextBackOff())
	}
}

// pause waits d before another attempt, or until stop ends; once stop has
// ended, a short while (the grace is short).
func pause(stop context.Context, d time.Duration) {
	if stop.Err() != nil {
		time.Sleep(min(d, 200*time.Millisecond))
		return
	}
	sleepCtx(stop, d)
}

// forwardTimeout bounds one attempt to forward a batch (or ack it): a
// broker that neither confirms nor refuses is tried again.
const forwardTimeout = 10 * time.Second

func (r *relayed) failed(err error) {
	r.failures.Add(1)
	s := err.Error()
	r.lastError.Store(&s)
}

func (r *relayed) newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = r.cfg.RetryInitial, r.cfg.RetryMax
	return b
}

// sleepCtx waits d or until ctx ends; false if ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Accept refuses while the outbox holds OutboxCap orders or more. The
// backlog is read at most every IntakeEvery, by one caller at a time; the
// others meanwhile use the last reading (a backlog that cannot be read
// admits: Redis itself answers for the reservation).
func (r *relayed) Accept(ctx context.Context) error {
	if time.Since(time.Unix(0, r.backlogAt.Load())) >= r.cfg.IntakeEvery && r.intakeMu.TryLock() {
		if time.Since(time.Unix(0, r.backlogAt.Load())) >= r.cfg.IntakeEvery {
			if st, err := r.oc.Stats.Stats(ctx); err == nil {
				r.backlog.Store(max(st.Depth, 0) + max(st.Pending, 0))
			}
			r.backlogAt.Store(time.Now().UnixNano())
		}
		r.intakeMu.Unlock()
	}
	if n := r.backlog.Load(); n >= r.cfg.OutboxCap {
		return core.E(core.CodeBusy, fmt.Sprintf("the broker is not taking orders fast enough: %d wait in the outbox (the cap is %d)", n, r.cfg.OutboxCap))
	}
	return nil
}

// RelayStats reports the relay's counts and the outbox's state.
func (r *relayed) RelayStats(ctx context.Context) (core.RelayStats, error) {
	s := core.RelayStats{Forwarded: r.forwarded.Load(), Failures: r.failures.Load(), Outbox: core.UnknownStats}
	if p := r.lastError.Load(); p != nil {
		s.LastError = *p
	}
	if r.oc.Stats != nil {
		st, err := r.oc.Stats.Stats(ctx)
		if err != nil {
			return s, err
		}
		s.Outbox = st
	}
	return s, nil
}

// stats count an order waiting in the outbox as waiting: Depth is the
// outbox's unread entries, what this process's relays are forwarding and
// the broker has not confirmed, and the broker's undelivered messages.
// (Not the outbox's pending entries: a confirmed batch stays pending until
// its ack, and would count twice; another process's batch in flight is not
// known here.)
func (r *relayed) stats(ctx context.Context) (core.QueueStats, error) {
	o, err := r.oc.Stats.Stats(ctx)
	if err != nil {
		return core.UnknownStats, err
	}
	b, err := r.bc.Stats.Stats(ctx)
	if err != nil {
		return core.UnknownStats, err
	}
	return core.QueueStats{
		Depth:         core.AddKnown(core.AddKnown(o.Depth, r.inFlight.Load()), b.Depth),
		Pending:       b.Pending,
		Lag:           core.MaxKnown(o.Lag, b.Lag),
		OldestPending: b.OldestPending,
		DeadLetters:   core.AddKnown(max(o.DeadLetters, 0), b.DeadLetters),
	}, nil
}

// heldOrders reads the outbox before the broker: an order the relay moves
// in between is then seen in one of them at least (twice is harmless: the
// list is by order id).
func (r *relayed) heldOrders(ctx context.Context, voucherID int64, buckets int) ([]core.Order, error) {
	v := core.Voucher{ID: voucherID, Buckets: buckets}
	inOutbox, err := r.oc.HeldOrdersOf(ctx, v)
	if err != nil {
		return nil, err
	}
	inBroker, err := r.bc.HeldOrdersOf(ctx, v)
	if err != nil {
		return nil, err
	}
	seen := make(map[int64]bool, len(inOutbox)+len(inBroker))
	var out []core.Order
	for _, o := range slices.Concat(inOutbox, inBroker) {
		if !seen[o.ID] {
			seen[o.ID] = true
			out = append(out, o)
		}
	}
	return out, nil
}

// holding is what the broker holds, and what this process's relays are
// forwarding to it. The outbox is not asked: it is in the live store, so
// after a loss it holds only orders the live store's buyers list.
func (r *relayed) holding(ctx context.Context) (string, error) {
	if n := r.inFlight.Load(); n > 0 {
		return fmt.Sprintf("%d orders being forwarded by this process's relays", n), nil
	}
	return r.bc.Holding.Holding(ctx)
}

type holdingFunc func(ctx context.Context) (string, error)

func (f holdingFunc) Holding(ctx context.Context) (string, error) { return f(ctx) }
