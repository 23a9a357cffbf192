package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/redisgate"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/userlock"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/consumergate"
	"github.com/seckill-lab/seckill/core/deadletters"
	"github.com/seckill-lab/seckill/core/recovery"
	"github.com/seckill-lab/seckill/core/steer"
)

// registerQueueMetrics registers the dead-letter register's collector, and
// the queue's and its relay's, for the backends that report them.
func (s *Server) registerQueueMetrics() {
	cfg, log := s.cfg, s.log
	s.metrics.registry.MustRegister(newDeadLetterCollector(cfg.Queue, s.store.DeadLetters(), func(err error) {
		log.Warn("dead-letter register unavailable", "err", err)
	}))
	caps := s.capabilities()
	if caps.Stats != nil {
		s.metrics.registry.MustRegister(newQueueCollector(cfg.Queue, caps.Stats, func(err error) {
			log.Warn("queue stats unavailable", "err", err)
		}))
	}
	if caps.Relay != nil {
		s.metrics.registry.MustRegister(newRelayCollector(cfg.Queue, caps.Relay, func(err error) {
			log.Warn("relay stats unavailable", "err", err)
		}))
	}
}

// ordersStore is where consumers persist orders: the consumers' own pool
// (MySQL), else the store.
func (s *Server) ordersStore() core.OrderStore {
	if s.orderStore != nil {
		return s.orderStore
	}
	return s.store
}

// newConsumers builds the consumers' pipeline (none for a backend without
// a queue).
func (s *Server) newConsumers(sale sale) orderConsumers {
	cfg, log := s.cfg, s.log
	if !sale.inRedis {
		return noConsumers{}
	}
	orders := s.ordersStore()
	if cfg.UserLock {
		orders = userlock.New(orders, s.rdb, cfg.KeyPrefix)
	}
	linger := cfg.ConsumerLinger
	if linger < 0 {
		linger = lingerFor(s.shards.Count())
	}
	if warning := claimOutlastsPayWindow(cfg); warning != "" {
		log.Warn(warning)
	}
	orders = s.spans().Store(orders, "persist orders", core.CapabilitiesOf(s.queue).Name)
	gate := consumergate.New(consumergate.Config{Board: redisgate.New(s.rdb, cfg.KeyPrefix), Truth: mysqlstore.NewSteering(s.store),
		Instance: redisgate.InstanceName(cfg.ConsumerName), Changed: s.metrics.ConsumersRun, Log: log})
	pipeline := core.NewPipeline(s.queue, orders, core.PipelineConfig{Recovery: s.guard,
		Consumers: cfg.Consumers, BatchSize: cfg.BatchSize, MaxDeliveries: cfg.MaxDeliver, Linger: linger,
		PayWindow: cfg.PayWindow, Signer: sale.signer, ReturnRefused: sale.returnRefused, Gate: gate,
	}, log, s.metrics)
	return queueConsumers{pipeline: pipeline, gate: gate, queue: s.queue, orders: s.ordersStore(), configured: cfg.Consumers, batch: cfg.BatchSize, log: log}
}

// idBlockSize is how many order ids a server takes from Redis at once. Each
// refill holds the ID worker's lock for a round trip, which every seckill
// then waits behind; a restart leaves at most one block unused, of the
// 2^32 ids a day allows.
const idBlockSize = 1000

// replyAllowance is the time a reservation script leaves its reply before
// the request's deadline: a tenth of the timeout, at most 200 ms (a reply
// takes well under a millisecond; what the allowance covers is a Redis
// that ran the script late and a loaded server that reads the reply late).
func replyAllowance(timeout time.Duration) time.Duration {
	return min(timeout/10, 200*time.Millisecond)
}

// sale is what the chosen backend puts on the request path.
type sale struct {
	// queue is the backend's queue (nil for a backend without one), over
	// shards in the planned layout (none without a Redis reservation).
	queue  core.Queue
	shards core.Shards
	layout layoutPlan

	reserver core.Reserver
	// evictionIs tells the reservation what Redis says of eviction
	// (nothing to tell where the sale is not in Redis).
	evictionIs func(redisreserve.EvictionState)
	board      core.StockBoard
	// buckets learns a rebuilt voucher's bucket count (the reservation's
	// side; nil under sync).
	buckets   core.BucketBoard
	publisher core.Publisher // nil when the reservation script enqueues
	liveParts
	// caps is what the queue declares: recovery reads its Holder (the
	// orders it holds) and Holding (whether a queue without a Holder whose
	// orders outlive Redis, RabbitMQ, holds any, for the first rebuild
	// after a loss).
	caps core.Capabilities
	// limit is the reservation's own check of the shopper's limit (nil:
	// the HTTP layer keeps it, under sync).
	limit core.ShopperLimit
	// returner gives a cancelled order's unit back to the live store
	// (core.DatabaseLiveState where the database is the live state), and
	// deadlines hands out the reservations due for payment (nil there).
	returner  core.UnitReturner
	deadlines core.Deadlines
	// duties are the reservation's own: re-driving transfers between a
	// hot voucher's buckets.
	duties []core.Duty
	letterParts
}

// liveParts are where the sale's live state is: inRedis, the shared Redis
// reservation feeding a queue (every backend but one with a Sale of its
// own, sync), whose state recovery rebuilds in live, operators' changes
// are written into by steering, and instances nudge each other of; else
// the database, which steering's first half writes (steer.DatabaseIsLive).
type liveParts struct {
	inRedis  bool
	live     recovery.LiveSale
	steering steer.Live
}

// letterParts are what the consumers and the dead letters' desk need of
// the sale beyond the queue: an outside broker's signatures, the requeue,
// and the live units of refused and re-driven orders.
type letterParts struct {
	// signer checks the order messages of an outside broker (nil for the
	// deployment's own queues).
	signer *core.OrderSigner
	// requeue hands orders to the queue again, as the reservation's
	// hand-off does (nil for a queue the reservation does not feed).
	requeue func(ctx context.Context, orders []core.Order) error
	// returnRefused gives back the live unit of an order the store refused
	// as its buyer's second (nil without the Redis reservation).
	returnRefused func(ctx context.Context, o core.Order, held int64) (core.ReturnResult, error)
	// bodies tells a dead letter's body this deployment signed (nil for
	// the deployment's own queues, whose bodies are all its own).
	bodies deadletters.Bodies
	// units makes a dead-lettered order's unit its own before a re-drive
	// persists it (nil without the Redis reservation: the database is the
	// live state).
	units deadletters.LiveUnits
}

// openSale opens the backend that SECKILL_QUEUE names and the reservation
// that feeds it, and plans the key layout they use; it returns all it
// builds and changes no key.
func (s *Server) openSale(ctx context.Context) (_ sale, err error) {
	b, ok := lookupBackend(s.cfg.Queue)
	if !ok {
		return sale{}, &configError{"SECKILL_QUEUE", s.cfg.Queue, "want one of " + strings.Join(BackendNames(), ", ")}
	}
	if b.Sale != nil {
		reserver, board := b.Sale(Deps{Config: s.cfg, Redis: s.rdb, Store: s.store, Log: s.log})
		return sale{reserver: reserver, board: board, returner: core.DatabaseLiveState, liveParts: liveParts{steering: steer.DatabaseIsLive},
			evictionIs: func(redisreserve.EvictionState) {}}, nil // Redis holds no sale
	}
	layout, err := s.planLayout(ctx, b)
	if err != nil {
		return sale{}, err
	}
	shards := layout.keys.Shards
	q, err := s.openQueues(ctx, b, Deps{Shards: shards}, shards.Count())
	if err != nil {
		return sale{}, fmt.Errorf("open queue %s: %w", b.Name, err)
	}
	defer func() {
		if err != nil {
			q.Close()
		}
	}()
	reserver, publisher, err := redisreserve.ForQueue(s.rdb, q, redisreserve.Config{Prefix: s.cfg.KeyPrefix, Shards: shards,
		Identity: s.identity, Log: s.log, OnReceivers: s.publishedTo, Coalesce: s.cfg.RedisCoalesce, Batch: s.cfg.RedisBatch, Tracer: s.tracing.scriptTracer(),
		WaitReplicas: s.cfg.WaitReplicas, WaitTimeout: s.cfg.WaitTimeout, ShopperRate: s.cfg.SeckillRate,
		PayWindow: s.deadlineWindow(), OrderBody: s.cfg.OrderBody, ReplyAllowance: replyAllowance(s.cfg.RequestTimeout),
		ClockOffset: s.clock.Offset})
	if err != nil {
		return sale{}, err
	}
	if s.clustered {
		if err := reserver.CheckClusterSlots(ctx); err != nil {
			return sale{}, fmt.Errorf("SECKILL_QUEUE=%s cannot run on this Redis Cluster: %w", b.Name, err)
		}
	}
	if err := reserver.Load(ctx); err != nil {
		return sale{}, err
	}
	caps := core.CapabilitiesOf(q)
	live := reserver.Live()
	out := sale{queue: q, shards: shards, layout: layout, reserver: reserver, board: reserver, publisher: publisher,
		liveParts: liveParts{inRedis: true, live: live, steering: reserver.Steering()}, buckets: reserver, limit: reserver, caps: caps, returner: live,
		duties: []core.Duty{reserver.TransfersDuty()}, evictionIs: reserver.EvictionIs}
	if s.cfg.Expiry != ExpirySweep {
		out.deadlines = live
	}
	if b.Broker != nil {
		out.signer = Deps{Config: s.cfg}.OrderSigner()
		out.bodies = out.signer
	}
	if caps.Handoff != nil {
		out.requeue = live.Requeue
	}
	out.returnRefused, out.units = live.ReturnRefused, reserver.Redrive()
	return out, nil
}

// deadlineWindow is the pay window the reservation records each deadline
// at: none when the database's sweep alone expires orders
// (SECKILL_EXPIRY=sweep), which saves the ZADD per order.
func (s *Server) deadlineWindow() time.Duration {
	if s.cfg.Expiry == ExpirySweep {
		return 0
	}
	return s.cfg.PayWindow
}

// publishedTo counts orders published to nobody (pubsub): reserved in
// Redis, never persisted. It logs at most one line a second about them.
func (s *Server) publishedTo(receivers int64) {
	if receivers > 0 {
		return
	}
	s.metrics.publishedToNone.Inc()
	now := time.Now().UnixNano()
	if last := s.lastUnheardLog.Load(); now-last > int64(time.Second) && s.lastUnheardLog.CompareAndSwap(last, now) {
		s.log.Error("order published with no subscriber: reserved but it will never be persisted",
			"queue", s.cfg.Queue, "unheard_total_metric", "seckill_published_unheard_total")
	}
}

// queueStats are the queue's stats: untold where it tells none, or where
// there is no queue.
func (s *Server) queueStats() core.StatsReporter {
	if st := s.capabilities().Stats; st != nil {
		return st
	}
	return untold{}
}

// capabilities are what the backend's queue declares (core.Capabilities):
// nothing for a backend without a queue.
func (s *Server) capabilities() core.Capabilities {
	if !s.queued {
		return core.Capabilities{}
	}
	return core.CapabilitiesOf(s.queue)
}

// untold stands in for what a backend does not tell (its queue's stats,
// a relay's): every read says so, and the reader shows nothing of it.
type untold struct{}

var errUntold = errors.New("the backend does not tell this")

func (untold) Stats(context.Context) (core.QueueStats, error) { return core.UnknownStats, errUntold }

func (untold) RelayStats(context.Context) (core.RelayStats, error) {
	return core.RelayStats{}, errUntold
}

// claimOutlastsPayWindow warns (never refuses) when a pending order can
// wait for its claim longer than its shopper has to pay: a consumer that
// hangs while its process still beats, or one of a version that does not
// beat, keeps its orders SECKILL_CLAIM_MIN_IDLE, and they expire unpaid
// before anyone persists them. A killed process's orders move within the
// heartbeat's window whatever this says.
func claimOutlastsPayWindow(cfg Config) string {
	if cfg.ClaimMinIdle < cfg.PayWindow {
		return ""
	}
	return fmt.Sprintf("SECKILL_CLAIM_MIN_IDLE (%v) is not shorter than SECKILL_PAY_WINDOW (%v): an order held by a consumer that hangs "+
		"can expire unpaid before another consumer takes it; set the claim time well below the pay window", cfg.ClaimMinIdle, cfg.PayWindow)
}
