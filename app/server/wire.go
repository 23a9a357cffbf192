package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redis/redis_rate/v10"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/logincode"
	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/paysandbox"
	"github.com/seckill-lab/seckill/adapters/redisclock"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/userlock"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
	"github.com/seckill-lab/seckill/core/recovery"
	"github.com/seckill-lab/seckill/core/room"
)

// Server is one wired instance: dependencies, queue, pipeline, HTTP.
type Server struct {
	cfg Config
	log *slog.Logger
	// admission is the queue's (nil: it always takes orders).
	intake core.Intake
	mini   *miniredis.Miniredis // nil unless Redis is embedded
	rdb    redis.UniversalClient
	// clustered: rdb is a Redis Cluster client.
	clustered bool
	// identity follows Redis's incarnation (run_id) for recovery.
	identity *redisreserve.Identity
	// saleDuties are the reservation's duties (sale.duties).
	saleDuties []core.Duty
	recovery   *recovery.Guard
	// memo answers sold out (not started, ended) from memory; nudges
	// keeps it in step with the other instances (nil without Redis).
	memo *core.AnswerMemo
	// unknown answers voucher ids the database lacks, for a moment; the
	// same nudges make it forget a voucher created on another instance.
	unknown *core.UnknownVouchers
	nudges  *redisreserve.StockNudges
	// shards spread the sale's keys (planLayout); zero under sync.
	shards core.Shards
	// layout is what Serve does to Redis's keys before it serves
	// (migrateLayout); nil once done, and under sync.
	layout *layoutPlan
	store  *mysqlstore.Store
	// tracing is nil when the server traces nothing (tracing.go).
	tracing *tracing
	// orderStore is the consumers' own pool on the same database (real
	// MySQL only; the embedded SQLite has one connection): nil uses store.
	orderStore *mysqlstore.Store
	// eviction is what Redis last said of eviction (checkEviction at
	// start, then watchEviction), for the dashboard.
	eviction atomic.Pointer[redisreserve.EvictionState]
	// evictionIs passes it on to the reservation (Reserver.EvictionIs),
	// whose checks depend on it; nil without a Redis reservation.
	evictionIs func(redisreserve.EvictionState)
	queue      core.Queue
	board      core.StockBoard
	catalog    *core.Catalog
	// rooms are the vouchers' waiting rooms; their admission passes run
	// in every instance.
	rooms    *room.Rooms
	pipeline *core.Pipeline
	// lifecycle cancels and expires orders and puts their units back.
	lifecycle *core.Lifecycle
	// deadLetters collects the queue's dead letters into the register (nil
	// for a queue that keeps none).
	deadLetters *deadletters.Collector
	// drift audits a few vouchers on sale at a time for units nobody holds
	// (with a Redis reservation).
	drift   *recovery.DriftWatch
	http    *fiber.App
	metrics *metrics
	// dashboard's series are recorded every second, watched or not.
	dashboard *dashboard
	// clock is Redis's clock as this instance estimates it: the rules the
	// scripts judge on Redis's clock are judged here on it too.
	clock *redisclock.Clock
	// lastUnheardLog rate-limits the "published to nobody" log line.
	lastUnheardLog atomic.Int64
}

// New connects to (or starts) Redis and the database, applies the schema,
// loads the scripts, creates the queue's structures and wires the API.
// Serve then runs it; Close releases what New opened.
func New(ctx context.Context, cfg Config, log *slog.Logger, opts ...Option) (_ *Server, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, metrics: newMetrics(cfg.Queue)}
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

// Store is the server's database (for tools that count rows).
func (s *Server) Store() *mysqlstore.Store { return s.store }

// Queue is the backend's queue; nil for a backend without one (sync).
func (s *Server) Queue() core.Queue { return s.queue }

// Catalog creates and reads vouchers: the admin API's.
func (s *Server) Catalog() *core.Catalog { return s.catalog }

// Shards are the shards the sale's keys are spread over (none under a
// backend without a Redis reservation).
func (s *Server) Shards() core.Shards { return s.shards }

// Config is the configuration the server runs.
func (s *Server) Config() Config { return s.cfg }

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
	if s.tracing != nil {
		if err := s.tracing.instrumentRedis(s.rdb); err != nil {
			return err
		}
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
	s.queue, s.shards, s.saleDuties = sale.queue, sale.shards, sale.duties
	if s.evictionIs = sale.evictionIs; s.evictionIs != nil {
		if st := s.eviction.Load(); st != nil {
			s.evictionIs(*st)
		}
	}
	if sale.layout.keys.Shards.Count() > 0 {
		s.layout = &sale.layout
	}
	seckill := s.wireSale(sale)
	sender, err := s.openCodeSender()
	if err != nil {
		return err
	}
	provider, err := s.openPayProvider()
	if err != nil {
		return err
	}
	a := s.newAPI(seckill, sale, sender, provider)
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
	if sale.live != nil {
		// The ID worker follows Redis's incarnation with recovery: a Redis
		// that forgot its counter never hands out an id the database has.
		idCfg.Identity, idCfg.Floor = s.identity, func(ctx context.Context, dayStart time.Time, lo, hi int64) (int64, error) {
			return s.store.Ledger().MaxOrderSequence(ctx, redisreserve.Epoch, dayStart, lo, hi)
		}
	}
	ids := redisreserve.NewIDWorker(s.rdb, idCfg)
	var nudger core.StockNudger
	if sale.live != nil {
		s.nudges = redisreserve.NewStockNudges(s.rdb, cfg.KeyPrefix, log)
		nudger = s.nudges
	}
	s.memo = core.NewAnswerMemo(cfg.AnswerMemo, nudger)
	s.unknown = core.NewUnknownVouchers(core.DefaultUnknownLifetime, s.store.HighestVoucherID)
	var ledger recovery.Ledger = s.store.Ledger()
	if sources := sale.caps.DeadLetters; len(sources) > 0 {
		s.deadLetters = &deadletters.Collector{Sources: sources, Register: s.store.DeadLetters()}
		ledger = collectingLedger{Ledger: ledger, collector: s.deadLetters, log: log}
	}
	if sale.live != nil {
		s.recovery = recovery.New(recovery.Config{Live: sale.live, Buckets: sale.buckets, Ledger: ledger, Queue: sale.caps,
			Requeue: sale.requeue, Memo: s.memo, Unknown: s.unknown, Log: log, Observer: s.metrics})
	}
	s.board = sale.board
	s.catalog = core.NewCatalog(core.CatalogConfig{Vouchers: s.store, Board: sale.board, Buckets: sale.buckets, Lister: s.store,
		Unknown: s.unknown, Nudger: nudger, Recovery: s.recovery})
	s.rooms = s.newRooms()
	s.intake = core.OpenIntake
	if s.queue != nil && core.CapabilitiesOf(s.queue).Intake != nil {
		s.intake = core.CapabilitiesOf(s.queue).Intake
	}
	seckill := core.NewSeckill(core.SeckillConfig{IDs: ids, Reserver: sale.reserver, Publisher: sale.publisher, Intake: s.intake,
		Orders: s.store, Recovery: s.recovery, Memo: s.memo, Holder: sale.caps.Holder, Limit: sale.limit, Trace: s.spans(), Letters: s.store.DeadLetters()})
	s.registerQueueMetrics()
	s.pipeline = s.newPipeline(sale)
	s.lifecycle = core.NewLifecycle(core.LifecycleConfig{Store: s.store.Lifecycle(), Live: s.spans().Returner(sale.returner), Memo: s.memo,
		Guard: s.recovery, Deadlines: sale.deadlines, PayWindow: cfg.PayWindow, Log: log, Observer: s.metrics})
	if s.recovery != nil {
		s.drift = &recovery.DriftWatch{Guard: s.recovery, Report: s.metrics.UnitsUnheld,
			Vouchers: func(ctx context.Context) ([]int64, error) {
				vs, err := s.store.CurrentVouchers(ctx, time.Now(), driftVouchers)
				ids := make([]int64, len(vs))
				for i, v := range vs {
					ids[i] = v.ID
				}
				return ids, err
			}}
	}
	return seckill
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

// registerQueueMetrics registers the dead-letter register's collector, and
// the queue's and its relay's, for the backends that report them.
func (s *Server) registerQueueMetrics() {
	cfg, log := s.cfg, s.log
	s.metrics.registry.MustRegister(newDeadLetterCollector(cfg.Queue, s.store.DeadLetters(), func(err error) {
		log.Warn("dead-letter register unavailable", "err", err)
	}))
	if r := queueStats(s.queue); r != nil {
		s.metrics.registry.MustRegister(newQueueCollector(cfg.Queue, r, func(err error) {
			log.Warn("queue stats unavailable", "err", err)
		}))
	}
	if s.queue != nil {
		if r := core.CapabilitiesOf(s.queue).Relay; r != nil {
			s.metrics.registry.MustRegister(newRelayCollector(cfg.Queue, r, func(err error) {
				log.Warn("relay stats unavailable", "err", err)
			}))
		}
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

// newPipeline builds the consumers' pipeline (nil for a backend without a
// queue).
func (s *Server) newPipeline(sale sale) *core.Pipeline {
	cfg, log := s.cfg, s.log
	if s.queue == nil {
		return nil
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
	return core.NewPipeline(s.queue, orders, core.PipelineConfig{Recovery: s.recovery,
		Consumers: cfg.Consumers, BatchSize: cfg.BatchSize, MaxDeliveries: cfg.MaxDeliver, Linger: linger,
		PayWindow: cfg.PayWindow, Signer: sale.signer, ReturnRefused: sale.returnRefused,
	}, log, s.metrics)
}

// newAPI builds the HTTP API over the wired sale.
func (s *Server) newAPI(seckill *core.Seckill, sale sale, sender core.CodeSender, provider core.PaymentProvider) *api {
	cfg, log := s.cfg, s.log
	// The shopper's limit has one owner: the reservation, when it keeps
	// one (the Redis script, at no round trip of its own); else the HTTP
	// layer, with a limiter of its own in Redis (sync).
	seckillRate := redis_rate.PerSecond(cfg.SeckillRate)
	if sale.limit != nil {
		seckillRate = redis_rate.Limit{} // a rate of 0 mounts no middleware
	}
	users := s.store.Users()
	a := &api{log: log, tracing: s.tracing, tokens: NewTokens(cfg.JWTSecret, cfg.TokenLifetime, cfg.JWTSecretPrevious), metrics: s.metrics,
		limits:  newRateLimits(s.rdb, cfg.KeyPrefix, log),
		clients: &clientAddresses{header: cfg.ProxyHeader, trusted: cfg.TrustedProxies, maxInFlight: cfg.MaxConnsPerIP},
		ready:   s.ready, requestTimeout: cfg.RequestTimeout,
		metricsElsewhere: cfg.MetricsAddr != "", metricsNeedToken: !cfg.EmbeddedRedis() || !cfg.EmbeddedSQL()}
	a.adminGate = newAdminGate(cfg.AdminToken, s.rdb, cfg.KeyPrefix, a.clients.limitKey, s.metrics.registry, log)
	payments := core.NewPayments(core.PaymentsConfig{Name: cfg.PayProvider, Provider: provider,
		Store: s.spans().Payments(s.store.Payments(), s.store)})
	a.shopper = &shopperRoutes{catalog: s.catalog, gate: room.NewGate(s.rooms, seckill), seckill: seckill, lifecycle: s.lifecycle,
		payments: payments, orders: s.store, shoppers: users, rooms: s.rooms, metrics: s.metrics,
		seckillRate: seckillRate, missRate: redis_rate.PerMinute(cfg.MissRate)}
	a.login = &loginRoutes{codes: logincode.New(s.rdb, logincode.Config{Prefix: cfg.KeyPrefix, PerPhone: cfg.CodesPerPhone}),
		sender: sender, devCodes: cfg.DevCodes, phoneRegion: cfg.PhoneRegion, phoneRegions: cfg.PhoneRegions,
		tokens: a.tokens, users: users, clients: a.clients, metrics: s.metrics, log: log,
		codeRate: redis_rate.PerMinute(cfg.CodeRate), loginRate: redis_rate.PerMinute(cfg.LoginRate)}
	a.payments = &paymentRoutes{payments: payments, paymentsDB: s.store.Payments(), orders: s.store, catalog: s.catalog}
	if sandbox, ok := provider.(*paysandbox.Sandbox); ok {
		a.payments.sandbox = sandbox
	}
	a.operator = &operatorRoutes{catalog: s.catalog, log: log, voucherAdmin: s.store, userAdmin: users, recovery: s.recovery,
		ledger: s.store.Ledger(), queueStats: queueStats(s.queue), backend: cfg.Queue, deadLetters: s.store.DeadLetters(),
		desk: deadletters.NewDesk(deadletters.DeskConfig{Register: s.store.DeadLetters(), Store: s.spans().Store(s.ordersStore(), "redrive orders", "dead letters"),
			Orders: s.store, Withdrawer: s.lifecycle, Units: sale.units, Guard: s.recovery, Bodies: sale.bodies, PayWindow: cfg.PayWindow, Limit: cfg.RedriveLimit, Observer: s.metrics}),
		dashboard: &dashboard{src: s.dashboardSources(), now: time.Now, eviction: func() *redisreserve.EvictionState { return s.eviction.Load() }}}
	return a
}

// dashboardSources are what the dashboard reads, and the warnings it shows.
func (s *Server) dashboardSources() dashboardSources {
	cfg := s.cfg
	src := dashboardSources{backend: cfg.Queue, orderCounts: s.store.Ledger(), queueStats: queueStats(s.queue),
		deadLetters: s.store.DeadLetters(), metrics: s.metrics, roomReports: s.rooms.Reports}
	if cfg.PaySandboxOnRealServers {
		src.warnings = append(src.warnings, "SECKILL_PAY_PROVIDER=sandbox on real servers: every order can be paid without money.")
	}
	if cfg.DevCodesForced {
		src.warnings = append(src.warnings, "SECKILL_DEV_CODES=force: every login code is returned to whoever asks for it, so anyone can log in as any phone.")
	}
	if s.queue != nil {
		src.relay = core.CapabilitiesOf(s.queue).Relay
		g := core.CapabilitiesOf(s.queue).Guarantees
		src.guarantees = &g
		if !g.RetainsWithoutConsumer {
			// The iteration the comparison measures loses orders by design:
			// say so where an operator looks, not only in the docs.
			warning := "SECKILL_QUEUE=" + cfg.Queue + " keeps no message nobody is subscribed to: an order published while no consumer listens (a restart, a deploy, a crash) is lost, the shopper having been told it was accepted; its unit comes back only at the order's payment deadline. Use streamgroup (the default) for a sale."
			src.warnings = append(src.warnings, warning)
			s.log.Warn(warning)
		}
	}
	return src
}

// openCodeSender opens the sender SECKILL_CODE_SENDER names, and says at
// start how codes reach shoppers when that is not the production way.
func (s *Server) openCodeSender() (core.CodeSender, error) {
	cfg := s.cfg
	if cfg.DevCodesForced {
		s.log.Warn("SECKILL_DEV_CODES=force: EVERY LOGIN CODE IS RETURNED TO WHOEVER ASKS FOR IT; anyone can log in as any phone. " +
			"Never run a real sale like this.")
	}
	if cfg.CodeSender == "" {
		if !cfg.DevCodes {
			s.log.Warn("no code sender is configured (SECKILL_CODE_WEBHOOK_URL or SECKILL_CODE_SENDER): nobody can log in; code requests are answered 503")
		}
		return nil, nil
	}
	sc, ok := lookupCodeSender(cfg.CodeSender)
	if !ok {
		return nil, &configError{"SECKILL_CODE_SENDER", cfg.CodeSender, "want one of " + strings.Join(CodeSenderNames(), ", ")}
	}
	sender, err := sc.Open(Deps{Config: cfg, Redis: s.rdb, Store: s.store, Log: s.log})
	if err != nil {
		return nil, fmt.Errorf("code sender %s: %w", sc.Name, err)
	}
	s.log.Info("login codes are delivered", "sender", sc.Name)
	return sender, nil
}

// openPayProvider opens the provider SECKILL_PAY_PROVIDER names (nil:
// payments disabled).
func (s *Server) openPayProvider() (core.PaymentProvider, error) {
	cfg := s.cfg
	if cfg.PayProvider == "" {
		s.log.Info("no payment provider (SECKILL_PAY_PROVIDER): orders cannot be paid, and expire after SECKILL_PAY_WINDOW", "pay_window", cfg.PayWindow)
		return nil, nil
	}
	pp, ok := lookupPayProvider(cfg.PayProvider)
	if !ok {
		return nil, &configError{"SECKILL_PAY_PROVIDER", cfg.PayProvider, "want one of " + strings.Join(PayProviderNames(), ", ")}
	}
	provider, err := pp.Open(Deps{Config: cfg, Redis: s.rdb, Store: s.store, Log: s.log})
	if err != nil {
		return nil, fmt.Errorf("payment provider %s: %w", pp.Name, err)
	}
	if cfg.PaySandboxOnRealServers {
		s.log.Warn("SECKILL_PAY_PROVIDER=sandbox ON REAL SERVERS: its pay page pays any order without money, so every order can be had for free. " +
			"Choose a real provider's adapter for a real sale.")
	}
	s.log.Info("orders are paid through", "provider", pp.Name, "pay_window", cfg.PayWindow)
	return provider, nil
}

// idBlockSize is how many order ids a server takes from Redis at once. Each
// refill holds the ID worker's lock for a round trip, which every seckill
// then waits behind; a restart leaves at most one block unused, of the
// 2^32 ids a day allows.
const idBlockSize = 1000

// driftVouchers bounds the vouchers on sale the drift audit goes round.
const driftVouchers = 1000

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
	// evictionIs tells the reservation what Redis says of eviction.
	evictionIs func(redisreserve.EvictionState)
	board      core.StockBoard
	// buckets learns a rebuilt voucher's bucket count (the reservation's
	// side; nil under sync).
	buckets   core.BucketBoard
	publisher core.Publisher // nil when the reservation script enqueues
	// live is what recovery rebuilds the sale's Redis state in: nil
	// unless the sale is the shared Redis reservation (not a backend's own
	// Sale), which is also when instances nudge each other of stock that
	// comes back.
	live recovery.LiveSale
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
		return sale{reserver: reserver, board: board, returner: core.DatabaseLiveState}, nil
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
		live: live, buckets: reserver, limit: reserver, caps: caps, returner: live,
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

func (s *Server) connectRedis(ctx context.Context) error {
	if s.cfg.EmbeddedRedis() {
		s.mini = miniredis.NewMiniRedis()
		if err := s.mini.Start(); err != nil {
			return fmt.Errorf("embedded redis: %w", err)
		}
		// Without it miniredis never expires keys on its own.
		s.mini.ClockTTL(true)
		s.identity = redisreserve.NewIdentity(s.cfg.KeyPrefix)
		s.rdb = redis.NewClient(&redis.Options{Addr: s.mini.Addr(), PoolSize: poolSize(s.cfg), OnConnect: s.identity.OnConnect})
		s.identity.Attach(s.rdb)
		return nil
	}
	target, err := parseRedisURL(s.cfg.RedisURL)
	if err != nil {
		return &configError{"SECKILL_REDIS_URL", redactURL(s.cfg.RedisURL), err.Error()}
	}
	s.identity = redisreserve.NewIdentity(s.cfg.KeyPrefix)
	s.rdb, s.clustered, err = dialRedis(ctx, target, poolSize(s.cfg), s.identity.OnConnect)
	if err == nil {
		s.identity.Attach(s.rdb)
	}
	if s.clustered {
		s.log.Info("connected to a Redis Cluster")
	}
	if err != nil {
		return err
	}
	return s.checkEviction(ctx)
}

// forgotten is what a queue calls when its Redis state vanished under an
// unchanged Redis (Deps.Forgotten): the incarnation changes, on every
// instance, so every voucher is rebuilt before its next use.
func (s *Server) forgotten() {
	s.forget("a queue's stream or group vanished")
}

// forgottenOn is forgotten for the queue of one shard: only the vouchers
// of that shard are rebuilt (the others are carried over to the new
// incarnation as they are: Reverify).
func (s *Server) forgottenOn(shards core.Shards, shard int) func() {
	mark := redisreserve.Keys{Prefix: s.cfg.KeyPrefix, Shards: shards}.ShardForgets(shard)
	return func() { s.forget("a queue's stream or group vanished", mark) }
}

// forget tells the incarnation's owner that part of the sale's state
// vanished under an unchanged run_id: on the shards whose marks are where
// (Keys.ShardForgets), or on any.
func (s *Server) forget(why string, where ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	inc, err := s.identity.Forget(ctx, where...)
	if err != nil {
		s.log.Error("could not record that Redis forgot part of the sale; vouchers are verified again at Redis's next incarnation only", "why", why, "err", err)
		return
	}
	s.log.Warn("Redis forgot part of the sale: every voucher is verified again before its next use, and those it held rebuilt", "why", why, "incarnation", inc, "shard_marks", where)
}

// checkEviction refuses a Redis that may evict the sale's keys, unless the
// operator allows it (SECKILL_REDIS_ALLOW_EVICTION=1).
func (s *Server) checkEviction(ctx context.Context) error {
	st, err := redisreserve.ReadEviction(ctx, s.rdb)
	if err != nil {
		return err
	}
	s.eviction.Store(&st)
	s.metrics.redisEvicted.Set(float64(st.Evicted))
	s.metrics.redisEvicting.Set(float64(len(st.Evicting())))
	evicting := st.Evicting()
	switch {
	case len(evicting) == 0:
		return nil
	case s.cfg.AllowEviction:
		s.log.Warn("Redis may evict the sale's keys (SECKILL_REDIS_ALLOW_EVICTION=1): an eviction loses state the server cannot always rebuild",
			"masters", strings.Join(evicting, ", "))
		return nil
	}
	return fmt.Errorf("maxmemory-policy of %s lets Redis evict the sale's keys, which loses orders and sells units twice; "+
		"set it to noeviction, or SECKILL_REDIS_ALLOW_EVICTION=1 to start anyway", strings.Join(evicting, ", "))
}

func (s *Server) openStore(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	hooks := s.tracing.sqlHooks()
	if s.cfg.EmbeddedSQL() {
		s.store, err = mysqlstore.OpenEmbedded(pctx, hooks...)
	} else {
		s.store, err = mysqlstore.OpenMySQL(pctx, s.cfg.MySQLDSN, s.cfg.MySQLMaxConns, hooks...)
		if err == nil && s.cfg.Consumers > 0 {
			// The consumers get a pool of their own: a crowd polling its
			// order status must not starve the writes of the orders it
			// polls for, nor a long save the API.
			s.orderStore, err = mysqlstore.OpenMySQL(pctx, s.cfg.MySQLDSN, s.cfg.MySQLMaxConns, hooks...)
		}
	}
	if err != nil {
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.store.Migrate(mctx); err != nil {
		return err
	}
	return s.normalizePhones(mctx)
}

// normalizePhones brings users stored before phones were normalised to
// E.164, and tells the operator of phones several users now share.
func (s *Server) normalizePhones(ctx context.Context) error {
	region := s.cfg.PhoneRegion
	rep, err := s.store.Users().NormalizePhones(ctx, func(p string) (string, error) { return core.NormalizePhone(p, region) })
	if err != nil {
		return err
	}
	if rep.Normalized > 0 || rep.Unreadable > 0 {
		s.log.Info("users' phones normalised to E.164", "normalised", rep.Normalized, "unreadable", rep.Unreadable, "region", region)
	}
	if len(rep.Collisions) > 0 {
		s.log.Warn("several users share a phone once normalised: each such phone logs in as its oldest user; "+
			"GET /api/admin/users/phone-collisions lists them (merging is an admin's decision)", "phones", len(rep.Collisions))
	}
	return nil
}

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

// openDemoSale opens the demo vouchers (SECKILL_DEMO_SALE).
func (s *Server) openDemoSale(ctx context.Context) error {
	now := time.Now().Truncate(time.Second)
	for _, v := range []core.Voucher{
		{Title: "Half-price coffee voucher", PayValue: 1250, ActualValue: 2500, Stock: 100, BeginAt: now.Add(-time.Minute), EndAt: now.Add(2 * time.Hour)},
		{Title: "Cinema night for two", PayValue: 3900, ActualValue: 9000, Stock: 20, BeginAt: now.Add(2 * time.Minute), EndAt: now.Add(2 * time.Hour)},
	} {
		if err := s.catalog.Create(ctx, &v); err != nil {
			return fmt.Errorf("demo sale: %w", err)
		}
		s.log.Info("demo voucher", "id", v.ID, "title", v.Title, "stock", v.Stock, "opens", v.BeginAt.Format(time.RFC3339))
	}
	return nil
}

// queueStats is q's stats, if it tells them (nil without a queue).
func queueStats(q core.Queue) core.StatsReporter {
	if q == nil {
		return nil
	}
	return core.CapabilitiesOf(q).Stats
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
