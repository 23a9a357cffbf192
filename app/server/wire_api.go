package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/core/refund"

	"github.com/go-redis/redis_rate/v10"

	"github.com/seckill-lab/seckill/adapters/logincode"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
	"github.com/seckill-lab/seckill/core/room"
)

// newAPI builds the HTTP API over the wired sale.
func (s *Server) newAPI(seckill *core.Seckill, sale sale, sender codeDelivery, pages providerPages) *api {
	cfg, log := s.cfg, s.log
	// The shopper's limit has one owner: the reservation, when it keeps
	// one (the Redis script, at no round trip of its own); else the HTTP
	// layer, with a limiter of its own in Redis (sync).
	seckillRate := redis_rate.PerSecond(cfg.SeckillRate)
	if sale.inRedis {
		seckillRate = redis_rate.Limit{} // a rate of 0 mounts no middleware
	}
	users := s.store.Users()
	a := &api{log: log, tracing: s.tracing, tokens: NewTokens(cfg.JWTSecret, cfg.TokenLifetime, cfg.JWTSecretPrevious), metrics: s.metrics,
		limits:  newRateLimits(s.rdb, cfg.KeyPrefix, log),
		clients: &clientAddresses{header: cfg.ProxyHeader, trusted: cfg.TrustedProxies, maxInFlight: cfg.MaxConnsPerIP},
		ready:   s.ready, requestTimeout: cfg.RequestTimeout,
		metricsElsewhere: cfg.MetricsAddr != "", metricsNeedToken: !cfg.EmbeddedRedis() || !cfg.EmbeddedSQL()}
	a.adminGate = newAdminGate(cfg.AdminToken, s.rdb, cfg.KeyPrefix, a.clients.limitKey, s.metrics.registry, log)
	payments := s.payments
	a.shopper = &shopperRoutes{catalog: s.catalog, gate: room.NewGate(s.rooms, seckill), seckill: seckill, lifecycle: s.lifecycle,
		payments: payments, orders: s.store, shoppers: users, rooms: s.rooms, metrics: s.metrics,
		seckillRate: seckillRate, missRate: redis_rate.PerMinute(cfg.MissRate)}
	a.login = &loginRoutes{codes: logincode.New(s.rdb, logincode.Config{Prefix: cfg.KeyPrefix, PerPhone: cfg.CodesPerPhone}),
		delivery: sender, devCodes: cfg.DevCodes, phoneRegion: cfg.PhoneRegion, phoneRegions: cfg.PhoneRegions,
		tokens: a.tokens, users: users, clients: a.clients, metrics: s.metrics, log: log,
		codeRate: redis_rate.PerMinute(cfg.CodeRate), loginRate: redis_rate.PerMinute(cfg.LoginRate)}
	refunds := refund.New(refund.Config{Store: mysqlstore.NewRefunds(s.store), Provider: payments, Releaser: s.lifecycle, Log: log})
	if payments.Provider() != "" {
		s.background.sweeps = append(s.background.sweeps, refunds.Duty())
	}
	a.payments = &paymentRoutes{payments: payments, pages: pages(s, payments),
		reconciliation: &reconciliationRoutes{reports: s.store.Payments()},
		refunds:        &refundRoutes{refunds: refunds, enabled: payments.Provider() != "", fingerprint: adminFingerprint(cfg.AdminToken)}}
	a.operator = &operatorRoutes{catalog: s.catalog, log: log, voucherAdmin: s.store, userAdmin: users, repairs: s.repairs(sale),
		deadLetters: s.store.DeadLetters(), steering: newSteeringRoutes(s.steering, cfg.AdminToken),
		desk: deadletters.NewDesk(deadletters.DeskConfig{Register: s.store.DeadLetters(), Store: s.spans().Store(s.ordersStore(), "redrive orders", "dead letters"),
			Orders: s.store, Withdrawer: s.lifecycle, Units: sale.units, Guard: s.guard, Bodies: sale.bodies, PayWindow: cfg.PayWindow, Limit: cfg.RedriveLimit, Observer: s.metrics}),
		dashboard: &dashboard{src: s.dashboardSources(), now: time.Now, eviction: func() *redisreserve.EvictionState { return s.eviction.Load() }}}
	return a
}

// repairs are the operators' audit and reconcile: of Redis's state where
// recovery rebuilds it, of the database alone where it is the live state.
func (s *Server) repairs(sale sale) voucherRepairs {
	if !sale.inRedis {
		return databaseRepairs{ledger: s.store.Ledger(), backend: s.cfg.Queue}
	}
	return liveRepairs{recovery: s.recovery, queueStats: s.queueStats(), backend: s.cfg.Queue, log: s.log}
}

// dashboardSources are what the dashboard reads, and the warnings it shows.
func (s *Server) dashboardSources() dashboardSources {
	cfg := s.cfg
	src := dashboardSources{backend: cfg.Queue, orderCounts: s.store.Ledger(), queueStats: s.queueStats(), relay: untold{},
		deadLetters: s.store.DeadLetters(), metrics: s.metrics, roomReports: s.rooms.Reports}
	if cfg.PaySandboxOnRealServers {
		src.warnings = append(src.warnings, "SECKILL_PAY_PROVIDER=sandbox on real servers: every order can be paid without money.")
	}
	if cfg.DevCodesForced {
		src.warnings = append(src.warnings, "SECKILL_DEV_CODES=force: every login code is returned to whoever asks for it, so anyone can log in as any phone.")
	}
	if r := s.capabilities().Relay; r != nil {
		src.relay = r
	}
	if s.queued {
		g := s.capabilities().Guarantees
		src.guarantees = map[string]bool{"durableAcrossConsumerCrash": g.DurableAcrossConsumerCrash, "acknowledged": g.Acknowledged,
			"replayable": g.Replayable, "competingConsumers": g.CompetingConsumers, "retainsWithoutConsumer": g.RetainsWithoutConsumer,
			"countsDeliveries": g.CountsDeliveries}
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
func (s *Server) openCodeSender() (codeDelivery, error) {
	cfg := s.cfg
	if cfg.DevCodesForced {
		s.log.Warn("SECKILL_DEV_CODES=force: EVERY LOGIN CODE IS RETURNED TO WHOEVER ASKS FOR IT; anyone can log in as any phone. " +
			"Never run a real sale like this.")
	}
	if cfg.CodeSender == "" {
		if !cfg.DevCodes {
			s.log.Warn("no code sender is configured (SECKILL_CODE_WEBHOOK_URL or SECKILL_CODE_SENDER): nobody can log in; code requests are answered 503")
		}
		return codeDelivery{sender: noSender{}}, nil
	}
	sc, ok := lookupCodeSender(cfg.CodeSender)
	if !ok {
		return codeDelivery{}, &configError{"SECKILL_CODE_SENDER", cfg.CodeSender, "want one of " + strings.Join(CodeSenderNames(), ", ")}
	}
	sender, err := sc.Open(Deps{Config: cfg, Redis: s.rdb, Store: s.store, Log: s.log})
	if err != nil {
		return codeDelivery{}, fmt.Errorf("code sender %s: %w", sc.Name, err)
	}
	s.log.Info("login codes are delivered", "sender", sc.Name)
	return codeDelivery{sender: sender, delivers: true}, nil
}

// openPayProvider opens the provider SECKILL_PAY_PROVIDER names (nil:
// payments disabled), and the pages of its own it serves.
func (s *Server) openPayProvider() (core.PaymentProvider, providerPages, error) {
	cfg := s.cfg
	if cfg.PayProvider == "" {
		s.log.Info("no payment provider (SECKILL_PAY_PROVIDER): orders cannot be paid, and expire after SECKILL_PAY_WINDOW", "pay_window", cfg.PayWindow)
		return nil, noPages, nil
	}
	pp, ok := lookupPayProvider(cfg.PayProvider)
	if !ok {
		return nil, nil, &configError{"SECKILL_PAY_PROVIDER", cfg.PayProvider, "want one of " + strings.Join(PayProviderNames(), ", ")}
	}
	provider, pages, err := pp.open(Deps{Config: cfg, Redis: s.rdb, Store: s.store, Log: s.log})
	if err != nil {
		return nil, nil, fmt.Errorf("payment provider %s: %w", pp.Name, err)
	}
	if cfg.PaySandboxOnRealServers {
		s.log.Warn("SECKILL_PAY_PROVIDER=sandbox ON REAL SERVERS: its pay page pays any order without money, so every order can be had for free. " +
			"Choose a real provider's adapter for a real sale.")
	}
	s.log.Info("orders are paid through", "provider", pp.Name, "pay_window", cfg.PayWindow)
	return provider, pages, nil
}
