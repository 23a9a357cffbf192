package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/redisclock"
	"github.com/seckill-lab/seckill/adapters/redislock"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
	"github.com/seckill-lab/seckill/core/payments"
	"github.com/seckill-lab/seckill/core/payreconcile"
	"github.com/seckill-lab/seckill/core/recovery"
	"github.com/seckill-lab/seckill/core/room"
	"github.com/seckill-lab/seckill/core/steer"
)

// Server is one wired instance: its connections, what it keeps of Redis,
// the sale's parts, and what serves them (HTTP, metrics, the dashboard).
type Server struct {
	cfg Config
	log *slog.Logger
	connections
	redisSide
	saleParts
	http    *fiber.App
	metrics *metrics
	// dashboard's series are recorded every second, watched or not.
	dashboard *dashboard
}

// connections are the server's connections to Redis and the database.
type connections struct {
	mini *miniredis.Miniredis // nil unless Redis is embedded
	rdb  redis.UniversalClient
	// clustered: rdb is a Redis Cluster client.
	clustered bool
	store     *mysqlstore.Store
	// orderStore is the consumers' own pool on the same database (real
	// MySQL only; the embedded SQLite has one connection): nil uses store.
	orderStore *mysqlstore.Store
	// tracing is noTracing when the server traces nothing (tracing.go).
	tracing tracing
}

// redisSide is what the server keeps of Redis: its incarnation, the keys'
// layout, its eviction policy and its clock.
type redisSide struct {
	// identity follows Redis's incarnation (run_id) for recovery.
	identity *redisreserve.Identity
	// shards spread the sale's keys (planLayout); zero under sync.
	shards core.Shards
	// layout is what Serve does to Redis's keys before it serves
	// (migrateLayout); nil once done, and under sync.
	layout *layoutPlan
	// eviction is what Redis last said of eviction (checkEviction at
	// start, then watchEviction), for the dashboard.
	eviction atomic.Pointer[redisreserve.EvictionState]
	// evictionIs passes it on to the reservation (Reserver.EvictionIs),
	// whose checks depend on it; nil without a Redis reservation.
	evictionIs func(redisreserve.EvictionState)
	// clock is Redis's clock as this instance estimates it: the rules the
	// scripts judge on Redis's clock are judged here on it too.
	clock *redisclock.Clock
	// lastUnheardLog rate-limits the "published to nobody" log line.
	lastUnheardLog atomic.Int64
}

// saleParts are the sale's parts as wired: the queue and what feeds and
// drains it, the vouchers, the rooms, the lifecycle, recovery.
type saleParts struct {
	// intake is the queue's (core.OpenIntake: it always takes orders).
	intake core.Intake
	// recovery rebuilds the sale's Redis state (with a Redis
	// reservation); guard is what core verifies live state with: it, or
	// core.NoRecovery where the database is the live state.
	recovery *recovery.Guard
	guard    core.LiveGuard
	// memo answers sold out (not started, ended) from memory.
	memo *core.AnswerMemo
	// unknown answers voucher ids the database lacks, for a moment; the
	// nudges make it forget a voucher created on another instance.
	unknown *core.UnknownVouchers
	queue   core.Queue
	// queued: the backend has a queue (all but sync, whose request
	// writes the database itself).
	queued  bool
	board   core.StockBoard
	catalog *core.Catalog
	// rooms are the vouchers' waiting rooms; their admission passes run
	// in every instance.
	rooms     *room.Rooms
	consumers orderConsumers
	// lifecycle cancels and expires orders and puts their units back.
	lifecycle *core.Lifecycle
	// steering carries out the operators' actions on running sales.
	steering *steer.Steering
	// payments pays orders through the provider, and asks it.
	payments *payments.Service
	// background is what the parts wired run beside the requests.
	background background
}

// background is what the wiring found to run beside the requests, by the
// stage Serve starts it in (services.go): each part that has work of its
// own adds it here as it is wired, so that what a backend lacks (recovery,
// nudges, dead letters under sync) is simply not in the lists.
type background struct {
	// watchers watch Redis: the reservation's own duties, its incarnation
	// and the drift audit of units nobody holds.
	watchers []core.Duty
	// listeners keep this instance in step with the others: the stock
	// nudges.
	listeners []core.Service
	// sweeps run beside the order lifecycle's: the dead-letter register's
	// collector.
	sweeps []core.Duty
	// evicted is what Redis evicting keys makes this instance do: verify
	// every voucher again (nothing where Redis holds no sale).
	evicted func()
}

// New connects to (or starts) Redis and the database, applies the schema,
// loads the scripts, creates the queue's structures and wires the API.
// Serve then runs it; Close releases what New opened.
func New(ctx context.Context, cfg Config, log *slog.Logger, opts ...Option) (_ *Server, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, metrics: newMetrics(cfg.Queue)}
	s.tracing = noTracing()
	for _, o := range opts {
		o(s)
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.wire(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// wire connects, migrates, opens the backend and builds the API.
func (s *Server) wire(ctx context.Context) error {
	// First: tracing may wrap the log every part below is given.
	if err := s.openTracing(ctx); err != nil {
		return err
	}
	cfg, log := s.cfg, s.log
	if err := s.connectRedis(ctx); err != nil {
		return err
	}
	s.clock = redisclock.New(s.rdb, log)
	if err := s.clock.Measure(ctx); err != nil {
		return err
	}
	s.metrics.registry.MustRegister(newClockCollector(cfg.Queue, s.clock.Offset))
	if err := s.openStore(ctx); err != nil {
		return err
	}
	if err := s.tracing.instrumentRedis(s.rdb); err != nil {
		return err
	}
	if cfg.EmbeddedRedis() || cfg.EmbeddedSQL() {
		log.Warn("running on embedded stand-ins: they start empty and keep nothing after exit",
			"redis", map[bool]string{true: "embedded miniredis", false: "configured"}[cfg.EmbeddedRedis()],
			"sql", map[bool]string{true: "embedded SQLite (in memory)", false: "configured"}[cfg.EmbeddedSQL()])
	}

	sale, err := s.openSale(ctx)
	if err != nil {
		return err
	}
	s.queue, s.queued, s.shards = sale.queue, sale.inRedis, sale.shards
	s.background = background{watchers: sale.duties, evicted: func() {}}
	s.evictionIs = sale.evictionIs
	if st := s.eviction.Load(); st != nil {
		s.evictionIs(*st)
	}
	if sale.layout.keys.Shards.Count() > 0 {
		s.layout = &sale.layout
	}
	// The provider before the sale: an order about to expire asks it.
	provider, pages, err := s.openPayProvider()
	if err != nil {
		return err
	}
	s.payments = payments.New(payments.Config{Name: cfg.PayProvider, Provider: provider,
		Store: s.spans().Payments(s.store.Payments(), s.store), Log: log})
	if provider != nil {
		reconciler := payreconcile.New(payreconcile.Config{Store: s.store.Payments(), Asker: s.payments,
			Locker: redislock.New(s.rdb, cfg.KeyPrefix), After: cfg.PayReconcileAfter, Observer: s.metrics, Log: log})
		s.background.sweeps = append(s.background.sweeps, reconciler.Duty())
		s.metrics.registry.MustRegister(newUnreconciledCollector(cfg.Queue, s.store.Payments(), cfg.PayReconcileAfter))
	}
	seckill := s.wireSale(sale)
	sender, err := s.openCodeSender()
	if err != nil {
		return err
	}
	a := s.newAPI(seckill, sale, sender, pages)
	s.http, s.dashboard = a.newServer(), a.operator.dashboard
	if cfg.DemoSale {
		return s.openDemoSale(ctx)
	}
	return nil
}

// wireSale builds the order flow over the opened sale: ids, memo,
// recovery, catalog, the shopper's use case, the pipeline and the
// lifecycle.
func (s *Server) wireSale(sale sale) *core.Seckill {
	cfg, log := s.cfg, s.log
	idCfg := redisreserve.IDWorkerConfig{Prefix: cfg.KeyPrefix, BlockSize: idBlockSize}
	if sale.inRedis {
		// The ID worker follows Redis's incarnation with recovery: a Redis
		// that forgot its counter never hands out an id the database has.
		idCfg.Identity, idCfg.Floor = s.identity, func(ctx context.Context, dayStart time.Time, lo, hi int64) (int64, error) {
			return s.store.Ledger().MaxOrderSequence(ctx, redisreserve.Epoch, dayStart, lo, hi)
		}
	}
	ids := redisreserve.NewIDWorker(s.rdb, idCfg)
	var nudger core.StockNudger
	// Where instances share no Redis sale (sync), the others' details of
	// a voucher an operator changed lapse within the catalog's second.
	changed := func(context.Context, int64) error { return nil }
	if sale.inRedis {
		nudges := s.listenToNudges(redisreserve.NewStockNudges(s.rdb, cfg.KeyPrefix, log))
		nudger, changed = nudges, nudges.NudgeChanged
	}
	s.memo = core.NewAnswerMemo(cfg.AnswerMemo, nudger)
	s.unknown = core.NewUnknownVouchers(core.DefaultUnknownLifetime, s.store.HighestVoucherID)
	var ledger recovery.Ledger = s.store.Ledger()
	if sources := sale.caps.DeadLetters; len(sources) > 0 {
		collector := &deadletters.Collector{Sources: sources, Register: s.store.DeadLetters()}
		ledger = collectingLedger{Ledger: ledger, collector: collector, log: log}
		// Every instance collects: the register keeps each record once.
		s.background.sweeps = append(s.background.sweeps, collector.Duty())
	}
	s.guard = core.NoRecovery // the database is the live state
	if sale.inRedis {
		s.recovery = recovery.New(recovery.Config{Live: sale.live, Buckets: sale.buckets, Ledger: ledger, Queue: sale.caps,
			Requeue: sale.requeue, Memo: s.memo, Unknown: s.unknown, Log: log, Observer: s.metrics})
		s.guard = s.recovery
	}
	s.board = sale.board
	s.catalog = core.NewCatalog(core.CatalogConfig{Vouchers: s.store, Board: sale.board, Buckets: sale.buckets, Lister: s.store,
		Unknown: s.unknown, Nudger: nudger, Recovery: s.guard,
		// The steering is built below, over the catalog; a creation asks
		// it at the time.
		Creating: func(ctx context.Context) (core.Pause, func(), error) { return s.steering.Creating(ctx) }})
	s.rooms = s.newRooms()
	s.intake = core.OpenIntake
	if in := s.capabilities().Intake; in != nil {
		s.intake = in
	}
	seckill := core.NewSeckill(core.SeckillConfig{IDs: ids, Reserver: sale.reserver, Publisher: sale.publisher, Intake: s.intake,
		Orders: s.store, Recovery: s.guard, Memo: s.memo, Holder: sale.caps.Holder, Limit: sale.limit, Trace: s.spans(), Letters: s.store.DeadLetters()})
	s.registerQueueMetrics()
	s.consumers = s.newConsumers(sale)
	s.lifecycle = core.NewLifecycle(core.LifecycleConfig{Store: s.payments.AskingBeforeExpiry(s.store.Lifecycle()), Live: s.spans().Returner(sale.returner), Memo: s.memo,
		Guard: s.guard, Deadlines: sale.deadlines, PayWindow: cfg.PayWindow, Log: log, Observer: s.metrics})
	if sale.inRedis {
		s.watchRecovery()
	}
	s.steering = s.newSteering(sale, changed)
	return seckill
}

// listenToNudges runs the stock nudges' listener: the sold-out memo and the
// unknown vouchers both forget on a nudge.
func (s *Server) listenToNudges(nudges *redisreserve.StockNudges) *redisreserve.StockNudges {
	s.background.listeners = append(s.background.listeners, core.NewService("stock nudges", func(ctx context.Context) error {
		nudges.Listen(ctx, redisreserve.Nudged{
			Forget:  func(v int64) { s.memo.Forget(v); s.unknown.Forget(v) },
			Changed: func(v int64) { s.memo.Forget(v); s.unknown.Forget(v); s.catalog.Forget(v) },
			Reset:   func() { s.memo.Clear(); s.unknown.Clear() },
		})
		return nil
	}))
	return nudges
}

// watchRecovery adds what a sale that recovery rebuilds is watched by:
// Redis's incarnation, the drift audit of units nobody holds, and a
// verification of every voucher when Redis evicts keys.
func (s *Server) watchRecovery() {
	drift := &recovery.DriftWatch{Guard: s.recovery, Report: s.metrics.UnitsUnheld,
		Vouchers: func(ctx context.Context) ([]int64, error) {
			vs, err := s.store.CurrentVouchers(ctx, time.Now(), driftVouchers)
			ids := make([]int64, len(vs))
			for i, v := range vs {
				ids[i] = v.ID
			}
			return ids, err
		}}
	s.background.watchers = append(s.background.watchers, s.identityDuty(), drift.Duty())
	s.background.evicted = func() { s.forget("Redis evicted keys") }
}

// collectingLedger is the database's ledger whose dead-lettered orders are
// read once the queue's dead letters are in the register: a rebuild in the
// second between a letter's dead-lettering and the collector's next run
// would otherwise deal its unit back on sale and forget its buyer.
// collectBeforeRebuild bounds the collection a rebuild makes first (a
// rebuild has a few seconds under its fence; the collector's own run every
// second takes what this one leaves).
const collectBeforeRebuild = time.Second

type collectingLedger struct {
	recovery.Ledger
	collector *deadletters.Collector
	log       *slog.Logger
}

// LetteredOrders collects first, best effort: a source that cannot be
// read (a cluster's master down holds one shard's dead stream) must not
// fail the rebuild of a voucher on the masters that answer; a letter it
// misses is the re-drive's to take back (Redrive.TakeBack).
func (l collectingLedger) LetteredOrders(ctx context.Context, voucherID int64) ([]core.Order, error) {
	collect, cancel := context.WithTimeout(ctx, collectBeforeRebuild)
	err := l.collector.Collect(collect)
	cancel()
	if err != nil {
		l.log.Warn("rebuild: the dead letters could not all be collected first; a letter missed is taken back at its re-drive", "voucher", voucherID, "err", err)
	}
	return l.Ledger.LetteredOrders(ctx, voucherID)
}

// driftVouchers bounds the vouchers on sale the drift audit goes round.
const driftVouchers = 1000

func (s *Server) ready(ctx context.Context) error {
	if err := errors.Join(s.rdb.Ping(ctx).Err(), s.store.Ping(ctx)); err != nil {
		return err
	}
	// An outbox at its cap: every seckill is answered busy.
	return s.intake.Accept(ctx)
}

// ServeMetrics serves /metrics on ln (SECKILL_METRICS_ADDR's listener,
// apart from the API's) until ctx is done. No token: the address is meant
// to be an internal one that only the scraper reaches.
func (s *Server) ServeMetrics(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	s.log.Info("metrics listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) Close() {
	if s.queue != nil {
		s.queue.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.orderStore != nil {
		s.orderStore.Close()
	}
	if s.rdb != nil {
		s.rdb.Close()
	}
	if s.mini != nil {
		s.mini.Close()
	}
	if err := s.tracing.close(); err != nil {
		s.log.Warn("spans not exported at the stop", "err", err)
	}
}
