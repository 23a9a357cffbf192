package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redis/redis_rate/v10"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/listqueue"
	"github.com/seckill-lab/seckill/adapters/logincode"
	"github.com/seckill-lab/seckill/adapters/memqueue"
	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/pubsubqueue"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/adapters/streamqueue"
	"github.com/seckill-lab/seckill/adapters/userlock"
	"github.com/seckill-lab/seckill/core"
)

// server is one wired instance: dependencies, queue, pipeline, HTTP.
type server struct {
	cfg      Config
	log      *slog.Logger
	mini     *miniredis.Miniredis // nil unless Redis is embedded
	rdb      redis.UniversalClient
	store    *mysqlstore.Store
	queue    core.Queue
	board    core.StockBoard
	pipeline *core.Pipeline
	http     *fiber.App
	metrics  *metrics
	// lastUnheardLog rate-limits the "published to nobody" log line.
	lastUnheardLog atomic.Int64
}

// build connects to (or starts) Redis and the database, applies the schema,
// loads the scripts, creates the queue's structures and wires the API.
func build(ctx context.Context, cfg Config, log *slog.Logger) (_ *server, err error) {
	s := &server{cfg: cfg, log: log, metrics: newMetrics(cfg.Queue)}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := s.connectRedis(ctx); err != nil {
		return nil, err
	}
	if err := s.openStore(ctx); err != nil {
		return nil, err
	}
	if cfg.EmbeddedRedis() || cfg.EmbeddedSQL() {
		log.Warn("running on embedded stand-ins: they start empty and keep nothing after exit",
			"redis", map[bool]string{true: "embedded miniredis", false: "configured"}[cfg.EmbeddedRedis()],
			"sql", map[bool]string{true: "embedded SQLite (in memory)", false: "configured"}[cfg.EmbeddedSQL()])
	}

	sale, err := s.openSale(ctx)
	if err != nil {
		return nil, err
	}
	s.board = sale.board
	if r, ok := s.queue.(core.StatsReporter); ok {
		s.metrics.registry.MustRegister(newQueueCollector(cfg.Queue, r, func(err error) {
			log.Warn("queue stats unavailable", "err", err)
		}))
	}
	if s.queue != nil {
		var orders core.OrderStore = s.store
		if cfg.UserLock {
			orders = userlock.New(s.store, s.rdb, cfg.KeyPrefix)
		}
		s.pipeline = core.NewPipeline(s.queue, orders, core.PipelineConfig{
			Consumers: cfg.Consumers, BatchSize: cfg.BatchSize, MaxDeliveries: cfg.MaxDeliver,
		}, log, s.metrics)
	}

	a := &api{
		log:         log,
		seckill:     core.NewSeckill(redisreserve.NewIDWorker(s.rdb, cfg.KeyPrefix, idBlockSize), sale.reserver, sale.publisher, s.store),
		catalog:     core.NewCatalog(s.store, sale.board),
		users:       s.store,
		codes:       logincode.New(s.rdb, logincode.Config{Prefix: cfg.KeyPrefix}),
		tokens:      newTokens(cfg.JWTSecret),
		metrics:     s.metrics,
		devCodes:    cfg.DevCodes,
		admin:       cfg.AdminToken,
		limits:      newRateLimits(s.rdb, cfg.KeyPrefix, log),
		seckillRate: redis_rate.PerSecond(cfg.SeckillRate),
		codeRate:    redis_rate.PerMinute(cfg.CodeRate),
		ready:       s.ready,
	}
	s.http = a.newServer()
	return s, nil
}

// idBlockSize is how many order ids a server takes from Redis at once. Each
// refill holds the ID worker's lock for a round trip, which every seckill
// then waits behind; a restart leaves at most one block unused, of the
// 2^32 ids a day allows.
const idBlockSize = 1000

// sale is what the chosen backend puts on the request path.
type sale struct {
	reserver  core.Reserver
	board     core.StockBoard
	publisher core.Publisher // nil when the reservation script enqueues
}

// openSale opens the queue that SECKILL_QUEUE names (s.queue stays nil for
// sync) and the reservation that feeds it. A new backend is one case here.
func (s *server) openSale(ctx context.Context) (sale, error) {
	cfg, prefix := s.cfg, s.cfg.KeyPrefix
	var handoff redisreserve.Handoff
	var queueKey string
	var publisher core.Publisher
	switch cfg.Queue {
	case "sync":
		ss := s.store.SyncSale()
		return sale{reserver: ss, board: ss}, nil
	case memqueue.Name:
		q := memqueue.New(memqueue.Config{Capacity: cfg.MemoryCapacity}, s.log)
		s.queue, publisher, handoff = q, q, redisreserve.HandoffNone
	case listqueue.Name:
		q := listqueue.New(s.rdb, listqueue.Config{Key: prefix + "orders:list", Reliable: cfg.ListReliable,
			ConsumerPrefix: cfg.ConsumerName}, s.log)
		s.queue, handoff, queueKey = q, redisreserve.HandoffLPush, q.Key()
	case pubsubqueue.Name:
		q, err := pubsubqueue.New(ctx, s.rdb, pubsubqueue.Config{Channel: prefix + "orders:channel", PublishOnly: cfg.Consumers == 0}, s.log)
		if err != nil {
			return sale{}, err
		}
		s.queue, handoff, queueKey = q, redisreserve.HandoffPublish, q.Channel()
	case streamqueue.Name:
		q, err := streamqueue.New(ctx, s.rdb, streamqueue.Config{Stream: prefix + "orders:stream", Reader: cfg.ConsumerName}, s.log)
		if err != nil {
			return sale{}, err
		}
		s.queue, handoff, queueKey = q, redisreserve.HandoffXAdd, q.Stream()
	case streamgroup.Name:
		q, err := streamgroup.New(ctx, s.rdb, streamgroup.Config{Stream: prefix + "orders",
			ClaimMinIdle: cfg.ClaimMinIdle, ConsumerPrefix: cfg.ConsumerName}, s.log)
		if err != nil {
			return sale{}, err
		}
		s.queue, handoff, queueKey = q, redisreserve.HandoffXAdd, q.Stream()
	default:
		return sale{}, fmt.Errorf("config: SECKILL_QUEUE=%q: unknown backend", cfg.Queue)
	}
	reserver, err := redisreserve.New(s.rdb, redisreserve.Config{
		Prefix: prefix, Handoff: handoff, QueueKey: queueKey, OnPublished: s.publishedTo, Coalesce: cfg.RedisCoalesce,
	})
	if err != nil {
		return sale{}, err
	}
	if err := reserver.Load(ctx); err != nil {
		return sale{}, err
	}
	return sale{reserver: reserver, board: reserver, publisher: publisher}, nil
}

// publishedTo counts orders published to nobody (pubsub): reserved in
// Redis, never persisted. It logs at most one line a second about them.
func (s *server) publishedTo(receivers int64) {
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

func (s *server) connectRedis(ctx context.Context) error {
	var opts *redis.Options
	if s.cfg.EmbeddedRedis() {
		s.mini = miniredis.NewMiniRedis()
		if err := s.mini.Start(); err != nil {
			return fmt.Errorf("embedded redis: %w", err)
		}
		// Without it miniredis never expires keys on its own.
		s.mini.ClockTTL(true)
		opts = &redis.Options{Addr: s.mini.Addr()}
	} else {
		var err error
		if opts, err = redis.ParseURL(s.cfg.RedisURL); err != nil {
			return fmt.Errorf("config: SECKILL_REDIS_URL: %w", err)
		}
	}
	opts.PoolSize = 64
	s.rdb = redis.NewClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.rdb.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %w", opts.Addr, err)
	}
	return nil
}

func (s *server) openStore(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	if s.cfg.EmbeddedSQL() {
		s.store, err = mysqlstore.OpenEmbedded(pctx)
	} else {
		s.store, err = mysqlstore.OpenMySQL(pctx, s.cfg.MySQLDSN)
	}
	if err != nil {
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return s.store.Migrate(mctx)
}

func (s *server) ready(ctx context.Context) error {
	return errors.Join(s.rdb.Ping(ctx).Err(), s.store.Ping(ctx))
}

// shutdownBudget is how long a stop may take before serve returns.
const shutdownBudget = 9 * time.Second

// serve runs the API on ln and the pipeline until ctx is done, then shuts
// down in order: stop taking requests and finish those in flight, then stop
// the consumers (each finishes and acks its batch), then close connections.
func (s *server) serve(ctx context.Context, ln net.Listener) error {
	pipeCtx, stopPipeline := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPipeline()
	var wg sync.WaitGroup
	if s.pipeline != nil && s.cfg.Consumers > 0 {
		wg.Go(func() {
			if err := s.pipeline.Run(pipeCtx); err != nil {
				s.log.Error("pipeline stopped", "err", err)
			}
		})
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- s.http.Listener(ln) }()
	s.log.Info("serving", "addr", ln.Addr().String(), "queue", s.cfg.Queue, "consumers", s.cfg.Consumers)

	var err error
	select {
	case <-ctx.Done():
	case err = <-httpErr:
		err = fmt.Errorf("http server: %w", err)
	}
	// The whole stop fits in the contract's 10 seconds: requests in
	// flight get up to 3, the consumers (and a drain of an in-process
	// queue) the rest.
	s.log.Info("shutting down")
	deadline := time.Now().Add(shutdownBudget)
	if serr := s.http.ShutdownWithTimeout(3 * time.Second); serr != nil {
		s.log.Warn("http shutdown", "err", serr)
	}
	stopPipeline()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		s.log.Warn("consumers did not stop in time; unacked batches are redelivered after a restart (lost for the memory queue)")
	}
	return err
}

func (s *server) close() {
	if s.queue != nil {
		s.queue.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.rdb != nil {
		s.rdb.Close()
	}
	if s.mini != nil {
		s.mini.Close()
	}
}
