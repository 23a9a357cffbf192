package core

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// PipelineConfig tunes the order pipeline. Zero values take the defaults.
type PipelineConfig struct {
	// Recovery is told of orders read from the queue in an incarnation of
	// the live store that has since ended, once they are persisted and
	// before they are acked (LiveGuard.RepairAfter; nil: NoRecovery).
	Recovery LiveGuard
	// Signer, if set, is the deployment's OrderSigner: a delivery whose
	// Signature it does not verify is dead-lettered unauthenticated, never
	// persisted. Set for the outside brokers, which anyone who reaches
	// them can write; the deployment's own Redis needs none.
	Signer *OrderSigner
	// ReturnRefused, if set, gives back, once, the live unit of an order
	// the store refused because its buyer holds another (the buyers' hash
	// was lost, and a second reservation went through): the store took no
	// stock for it, the live store did. held is the order the buyer holds.
	// Nil: the unit stays taken until a rebuild (the audit shows it).
	ReturnRefused func(ctx context.Context, o Order, held int64) (ReturnResult, error)
	// Consumers is the number of consumer goroutines. Default 2; a
	// sharded queue (Capabilities.Shards) gets at least one per shard.
	Consumers int
	// BatchSize is the most deliveries persisted in one transaction.
	// Default 500: one transaction per order caps MySQL near 1.5k orders/s,
	// a few hundred per transaction reach ~100k.
	BatchSize int
	// MaxDeliveries: a message delivered more often than this goes to the
	// dead-letter destination unprocessed. Default 5.
	MaxDeliveries int
	// RetryInitial and RetryMax bound the backoff between attempts while
	// the store fails. Defaults 100ms and 5s.
	RetryInitial, RetryMax time.Duration
	// AttemptTimeout bounds one store or queue call. Default 10s.
	AttemptTimeout time.Duration
	// Linger: after a batch smaller than BatchSize, a consumer waits this
	// long before it fetches again, so the next batch gathers more. Where
	// each consumer sees a trickle (a sale spread over many shards) that
	// turns many one-order transactions into fewer, larger ones, at up to
	// Linger more time from reservation to row. A full batch (a backlog)
	// never waits. Default 0: no wait.
	Linger time.Duration
	// PayWindow is how long an order may stay unpaid after its
	// reservation: each order is persisted with that deadline (PayBy).
	// 0: orders never expire.
	PayWindow time.Duration
	// Gate is asked before each fetch: an operator's pause or cap of the
	// consumers (nil: OpenGate). The drain after the stop signal does not
	// ask: what it drains exists nowhere else.
	Gate ConsumerGate
}

func (c *PipelineConfig) setDefaults() {
	if c.Consumers <= 0 {
		c.Consumers = 2
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.MaxDeliveries <= 0 {
		c.MaxDeliveries = 5
	}
	if c.RetryInitial <= 0 {
		c.RetryInitial = 100 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Second
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = 10 * time.Second
	}
	if c.Gate == nil {
		c.Gate = OpenGate{}
	}
}

// PipelineObserver receives the pipeline's events, for metrics.
type PipelineObserver interface {
	BatchFetched(size int)
	BatchPersisted(res SaveResult, took time.Duration)
	DeadLettered(reason DeadLetterReason)
	StoreFailed(err error)
	QueueFailed(op string, err error)
}

// DeadLetterReason classifies why a message was dead-lettered.
type DeadLetterReason string

const (
	DeadLetterPoison       DeadLetterReason = "poison"
	DeadLetterTooManyTries DeadLetterReason = "max_deliveries"
	DeadLetterStockAnomaly DeadLetterReason = "stock_anomaly"
	// DeadLetterIDCollision: the order's id is already another order's.
	DeadLetterIDCollision DeadLetterReason = "id_collision"
	// DeadLetterBuyerHoldsAnother: the buyer already has another order of
	// the voucher in the database.
	DeadLetterBuyerHoldsAnother DeadLetterReason = "buyer_holds_another"
	// DeadLetterUnauthenticated: the message does not carry this
	// deployment's signature (published to an outside broker by someone
	// else); it is never persisted.
	DeadLetterUnauthenticated DeadLetterReason = "unauthenticated"
)

// Pipeline moves orders from a Queue into an OrderStore: read a batch,
// decode, persist it in one transaction, ack. While the store fails it
// retries with backoff; a message it cannot process goes to the dead-letter
// destination and the pipeline moves on. Cancelling Run's context stops
// fetching; a batch in flight is finished and acked first.
type Pipeline struct {
	queue Queue
	caps  Capabilities
	store OrderStore
	cfg   PipelineConfig
	log   *slog.Logger
	obs   PipelineObserver
	// recovery repairs the live store after orders read before it forgot
	// the sale are persisted (LiveGuard.RepairAfter).
	recovery LiveGuard
}

// incarnation is the live store's incarnation as a batch is read ("" for
// NoRecovery).
func (p *Pipeline) incarnation(ctx context.Context) string {
	inc, _ := p.recovery.Incarnation(ctx)
	return inc
}

// NewPipeline builds a pipeline; obs may be nil.
func NewPipeline(q Queue, store OrderStore, cfg PipelineConfig, log *slog.Logger, obs PipelineObserver) *Pipeline {
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if obs == nil {
		obs = nopObserver{}
	}
	return &Pipeline{queue: q, caps: CapabilitiesOf(q), store: store, cfg: cfg, log: log, obs: obs, recovery: GuardOr(cfg.Recovery)}
}

// Run starts the consumers and blocks until ctx is cancelled and every
// consumer has finished its batch in flight.
func (p *Pipeline) Run(ctx context.Context) error {
	n := p.Consumers()
	p.cfg.Gate.Runs(n)
	consumers := make([]Consumer, 0, n)
	for i := 0; i < n; i++ {
		c, err := p.queue.Consumer(ctx, i)
		if err != nil {
			for _, c := range consumers {
				c.Close()
			}
			return fmt.Errorf("pipeline: consumer %d: %w", i, err)
		}
		consumers = append(consumers, c)
	}
	// The queue's duties (heartbeats among them) run until the last
	// consumer has finished its batch in flight, not just until the stop
	// signal: a consumer still storing must not look dead.
	dutyCtx, stopDuties := context.WithCancel(context.WithoutCancel(ctx))
	duties := make(chan struct{})
	go func() {
		defer close(duties)
		RunQueueDuties(dutyCtx, p.queue, func(d Duty, err error) {
			p.obs.QueueFailed(d.Name, err)
			p.log.Warn("queue duty failed", "queue", p.caps.Name, "duty", d.Name, "err", err)
		})
	}()
	var wg sync.WaitGroup
	for _, c := range consumers {
		wg.Go(func() {
			defer c.Close()
			p.consume(ctx, c)
		})
	}
	wg.Wait()
	stopDuties()
	<-duties
	return nil
}

// Consumers is how many consumers Run starts: the configured number, or
// one per shard of a sharded queue if that is more, since every shard must
// be read in every process.
func (p *Pipeline) Consumers() int {
	return max(p.cfg.Consumers, p.caps.Shards)
}

func (p *Pipeline) consume(ctx context.Context, c Consumer) {
	p.consumeUntilDone(ctx, c)
	if p.caps.Drains {
		p.drain(ctx, c)
	}
}

// drainBatchSize is the least batch size of a drain: with the process on
// its way out, throughput is all that matters.
const drainBatchSize = 512

// drain empties an in-process queue after the stop signal. The server stops
// taking requests before it stops the pipeline, so nothing new arrives.
func (p *Pipeline) drain(ctx context.Context, c Consumer) {
	work := context.WithoutCancel(ctx)
	for {
		fctx, cancel := context.WithTimeout(work, p.cfg.AttemptTimeout)
		ds, err := c.Fetch(fctx, max(p.cfg.BatchSize, drainBatchSize))
		cancel()
		if err != nil || len(ds) == 0 {
			return
		}
		p.obs.BatchFetched(len(ds))
		// Store failures during the drain are retried on work until they
		// succeed or the process is killed: these messages exist nowhere else.
		p.Handle(work, c, ds)
	}
}

// consumeUntilDone fetches and handles batches until ctx is done.
//
// Where a crash cannot lose what a consumer holds (the queue redelivers
// it), a full batch is persisted on another goroutine while this one
// fetches and decodes the next: the drain of a backlog then runs at the
// store's pace instead of the sum of fetch, decode, store and ack. Every
// call on the Consumer stays on this goroutine, in order; at most two
// batches are held, and one is persisted at a time. Backends that lose what
// they handed out (memory, pubsub, the plain list) never read ahead, so a
// crash costs them one batch, as before. If the queue runs dry just after
// a full batch, that batch's ack waits for the empty fetch to return: the
// backend's block time (1 s), well under any claim idle time.
func (p *Pipeline) consumeUntilDone(ctx context.Context, c Consumer) {
	wait := p.newBackoff()
	readAhead := p.caps.Guarantees.DurableAcrossConsumerCrash
	var inflight chan persisted // the batch being persisted, if any
	finishInflight := func() {
		if inflight != nil {
			p.finish(ctx, c, <-inflight)
			inflight = nil
		}
	}
	defer finishInflight()
	gate := p.cfg.Gate
	for ctx.Err() == nil {
		if gate.Paused() {
			// Paused: what this consumer holds is finished first, so once
			// every consumer is parked no row is written until the resume.
			finishInflight()
			gate.Hold(ctx)
			continue
		}
		readIn := p.incarnation(ctx)
		asked := gate.Batch(p.cfg.BatchSize)
		ds, err := c.Fetch(ctx, asked)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.obs.QueueFailed("fetch", err)
			p.log.Error("fetch failed", "queue", p.caps.Name, "err", err)
			finishInflight()
			Sleep(ctx, wait.NextBackOff())
			continue
		}
		wait.Reset()
		if len(ds) == 0 {
			finishInflight()
			continue
		}
		p.obs.BatchFetched(len(ds))
		gate.Charge(ctx, len(ds))
		b := p.prepare(ctx, c, ds)
		b.readIn = readIn
		// One persist at a time: wait for the previous batch's before
		// starting this one's, and ack it after, while this one is stored.
		var previous *persisted
		if inflight != nil {
			r := <-inflight
			previous, inflight = &r, nil
		}
		if len(b.orders) > 0 && readAhead && len(ds) == asked {
			// A full batch: more are likely waiting, so fetch the next
			// one while this one is stored.
			inflight = make(chan persisted, 1)
			go func(done chan<- persisted) { done <- p.persistBatch(ctx, b) }(inflight)
		}
		if previous != nil {
			p.finish(ctx, c, *previous)
		}
		if len(b.orders) > 0 && inflight == nil {
			p.finish(ctx, c, p.persistBatch(ctx, b))
		}
		if p.cfg.Linger > 0 && len(ds) < asked {
			Sleep(ctx, p.cfg.Linger)
		}
	}
}

// batch is a fetched batch, decoded: the orders to persist (one per order
// id) and every delivery that carried each of them.
type batch struct {
	deliveries   int
	orders       []Order
	deliveriesOf map[int64][]Delivery
	// readIn is the live store's incarnation when the batch was read.
	readIn string
}

// persisted is a batch after its persist attempt.
type persisted struct {
	batch
	res SaveResult
	err error
}

// Handle processes one fetched batch. It is exported for tests that drive a
// consumer by hand (to kill it between persist and ack, say).
func (p *Pipeline) Handle(ctx context.Context, c Consumer, ds []Delivery) {
	readIn := p.incarnation(ctx)
	b := p.prepare(ctx, c, ds)
	b.readIn = readIn
	if len(b.orders) == 0 {
		return
	}
	p.finish(ctx, c, p.persistBatch(ctx, b))
}

// prepare decodes a batch; what cannot be processed is dead-lettered.
func (p *Pipeline) prepare(ctx context.Context, c Consumer, ds []Delivery) batch {
	// In-flight work outlives a shutdown signal.
	work := context.WithoutCancel(ctx)
	b := batch{deliveries: len(ds), orders: make([]Order, 0, len(ds)), deliveriesOf: make(map[int64][]Delivery, len(ds))}
	for _, d := range ds {
		// The signature first: nothing else about a message is believed
		// before it verifies (the review's unsigned order with a forged
		// x-delivery-count of 99 was filed max_deliveries, and a routine
		// re-drive of those persisted it).
		if p.cfg.Signer != nil && !p.cfg.Signer.Valid(d.Body, d.Signature) {
			p.deadLetter(work, c, d, DeadLetterUnauthenticated, "the message does not carry this deployment's signature: not an order of ours")
			continue
		}
		if d.Attempt > p.cfg.MaxDeliveries {
			p.deadLetter(work, c, d, DeadLetterTooManyTries, fmt.Sprintf("delivered %d times", d.Attempt))
			continue
		}
		o, err := DecodeOrder(d.Body)
		if err != nil {
			p.deadLetter(work, c, d, DeadLetterPoison, err.Error())
			continue
		}
		if p.cfg.PayWindow > 0 {
			o.PayBy = o.CreatedAt.Add(p.cfg.PayWindow)
		}
		if _, seen := b.deliveriesOf[o.ID]; !seen {
			b.orders = append(b.orders, o)
		}
		b.deliveriesOf[o.ID] = append(b.deliveriesOf[o.ID], d)
	}
	return b
}

// persistBatch stores a prepared batch; it calls nothing on the consumer,
// so it may run beside the consumer's next fetch.
func (p *Pipeline) persistBatch(ctx context.Context, b batch) persisted {
	res, err := p.persist(ctx, context.WithoutCancel(ctx), b.orders)
	return persisted{batch: b, res: res, err: err}
}

// finish acks a persisted batch, and dead-letters what the store refused.
func (p *Pipeline) finish(ctx context.Context, c Consumer, r persisted) {
	// A persisted batch must be acked even during a shutdown, or it is
	// redelivered (harmless, but slower to drain).
	work := context.WithoutCancel(ctx)
	if r.err != nil {
		// Shut down while the store was failing: nothing is acked, so the
		// backend redelivers these (where it can) after the restart.
		p.log.Warn("stopped before the batch was persisted; left unacked",
			"queue", p.caps.Name, "orders", len(r.orders), "err", r.err)
		return
	}
	for _, rej := range r.res.Rejected {
		kind := rej.Kind
		if kind == "" {
			kind = DeadLetterStockAnomaly
		}
		p.log.Error("order refused by the store: the reservation and the database disagree",
			"kind", kind, "order", rej.Order.ID, "user", rej.Order.UserID, "voucher", rej.Order.VoucherID, "reason", rej.Reason,
			"trace_id", rej.Order.TraceID())
		reason := rej.Reason
		if kind == DeadLetterBuyerHoldsAnother {
			reason += p.returnRefused(work, rej)
		}
		for _, d := range r.deliveriesOf[rej.Order.ID] {
			p.deadLetter(work, c, d, kind, reason)
		}
		delete(r.deliveriesOf, rej.Order.ID)
	}
	ack := make([]Delivery, 0, r.deliveries)
	persisted := make([]Order, 0, len(r.orders))
	for _, o := range r.orders {
		if ds, ok := r.deliveriesOf[o.ID]; ok {
			ack = append(ack, ds...)
			persisted = append(persisted, o)
		}
	}
	if len(ack) == 0 {
		return
	}
	// Before the ack: should the process die first, the batch comes back,
	// is found persisted, and is repaired then. A repair that fails (Redis
	// unreachable mid-failover) is tried again until it works or the
	// pipeline stops: left unacked on a live consumer, the batch would not
	// come back on a broker that redelivers only what a dead consumer
	// held (RabbitMQ, Kafka), nor on one this process keeps telling that
	// it still works on the batch (JetStream).
	if _, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := p.recovery.RepairAfter(work, r.readIn, persisted)
		if err != nil {
			p.obs.QueueFailed("repair", err)
			p.log.Error("could not tell Redis of orders persisted across its loss; trying again",
				"queue", p.caps.Name, "orders", len(persisted), "err", err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(p.newBackoff()), backoff.WithMaxElapsedTime(0)); err != nil {
		p.log.Warn("stopped before orders persisted across Redis's loss were told to it; left unacked, to repair on redelivery",
			"queue", p.caps.Name, "orders", len(persisted), "err", err)
		return
	}
	actx, cancel := context.WithTimeout(work, p.cfg.AttemptTimeout)
	defer cancel()
	if err := c.Ack(actx, ack); err != nil {
		// Persisted but not acked: redelivery is absorbed as duplicates.
		p.obs.QueueFailed("ack", err)
		p.log.Error("ack failed; the batch will be redelivered and deduplicated",
			"queue", p.caps.Name, "deliveries", len(ack), "err", err)
	}
}

// persist saves the batch, retrying with backoff until it succeeds or ctx
// (the shutdown signal) is done. Each attempt runs on work, so an attempt in
// flight at shutdown completes.
func (p *Pipeline) persist(ctx, work context.Context, orders []Order) (SaveResult, error) {
	return backoff.Retry(ctx, func() (SaveResult, error) {
		actx, cancel := context.WithTimeout(work, p.cfg.AttemptTimeout)
		defer cancel()
		start := time.Now()
		res, err := p.save(actx, orders)
		if err == nil {
			p.obs.BatchPersisted(res, time.Since(start))
		}
		return res, err
	}, backoff.WithBackOff(p.newBackoff()), backoff.WithMaxElapsedTime(0))
}

// save is one persist attempt (in its span where the server traces: a
// wrapper of the store's, added at wiring).
func (p *Pipeline) save(ctx context.Context, orders []Order) (SaveResult, error) {
	res, err := p.store.SaveOrders(ctx, orders)
	if err != nil {
		p.obs.StoreFailed(err)
		p.log.ErrorContext(ctx, "persist failed, retrying", "orders", len(orders), "err", err)
	}
	return res, err
}

func (p *Pipeline) deadLetter(ctx context.Context, c Consumer, d Delivery, reason DeadLetterReason, detail string) {
	actx, cancel := context.WithTimeout(ctx, p.cfg.AttemptTimeout)
	defer cancel()
	if err := c.DeadLetter(actx, d, string(reason)+": "+detail); err != nil {
		// Left unacked: it comes back and is dead-lettered then.
		p.obs.QueueFailed("dead_letter", err)
		p.log.Error("dead-letter failed", "queue", p.caps.Name, "delivery", d.ID, "err", err)
		return
	}
	p.obs.DeadLettered(reason)
	p.log.Warn("message dead-lettered", "queue", p.caps.Name, "delivery", d.ID,
		"attempt", d.Attempt, "reason", reason, "detail", detail)
}

// returnRefused gives a refused second order's unit back to the live store
// (ReturnRefused) and says what became of it, for the dead letter: the
// operator reads there that the unit is back, so discarding the letter
// later returns nothing more (the script returns a unit once: the buyer's
// mark names the held order after it).
func (p *Pipeline) returnRefused(ctx context.Context, rej Rejection) string {
	if p.cfg.ReturnRefused == nil {
		return "; its unit is still taken in the live store (a rebuild gives it back)"
	}
	actx, cancel := context.WithTimeout(ctx, p.cfg.AttemptTimeout)
	defer cancel()
	res, err := p.cfg.ReturnRefused(actx, rej.Order, rej.Held)
	if err != nil {
		p.log.Error("could not give a refused order's unit back", "order", rej.Order.ID, "err", err)
	}
	return RefusedUnitNote(res, err)
}

// RefusedUnitNote says, for the dead letter of an order refused as its
// buyer's second, what giving its unit back did (the consumers' and a
// re-drive's words alike).
func RefusedUnitNote(res ReturnResult, err error) string {
	switch {
	case err != nil:
		return "; its unit could not be given back (" + err.Error() + "): a rebuild gives it back"
	case res == UnitReturned:
		return "; its unit went back on sale, returned once"
	case res == NothingToReturn:
		return "; its unit was given back before"
	}
	return "; its unit is given back by the voucher's rebuild"
}

func (p *Pipeline) newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.cfg.RetryInitial
	b.MaxInterval = p.cfg.RetryMax
	return b
}

// Sleep waits d, or until ctx ends, whichever is first.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

type nopObserver struct{}

func (nopObserver) BatchFetched(int)                         {}
func (nopObserver) BatchPersisted(SaveResult, time.Duration) {}
func (nopObserver) DeadLettered(DeadLetterReason)            {}
func (nopObserver) StoreFailed(error)                        {}
func (nopObserver) QueueFailed(string, error)                {}
