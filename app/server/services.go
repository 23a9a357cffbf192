package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
)

// shutdownBudget is how long a stop may take before Serve returns: the
// contract's 10 seconds, less a second for the process to exit.
const shutdownBudget = 9 * time.Second

// httpDrain is how long requests in flight get to finish at a stop; the
// consumers get the rest of the budget.
const httpDrain = 3 * time.Second

// services are the server's background parts, in the order they start,
// once Redis is in the planned key layout (migrateLayout, before any):
//
//  1. redis watchers — Redis's incarnation every second, its eviction
//     policy and count every 5 s, the transfers between a hot voucher's
//     buckets left pending every 5 s (duties, on one ticker each);
//  2. stock nudges — the pub/sub listener that tells this instance's
//     memos of stock that came back on another;
//  3. pipeline — the consumers, with the queue's own duties;
//  4. order lifecycle — the sweep that expires unpaid orders and re-drives
//     interrupted releases of their units, and the dead-letter register's
//     collector;
//  5. room admission — the waiting rooms' admission passes;
//  6. http — the API, on ln.
//
// They stop in the reverse order: the API stops taking requests and
// finishes those in flight, then the consumers finish and ack their
// batches, then the listener and the watchers stop. Everything that takes
// work in stops before what completes it.
func (s *Server) services(ln net.Listener) core.Services {
	var ss core.Services
	if watchers := s.watcherDuties(); len(watchers) > 0 {
		ss = append(ss, core.DutiesService("redis watchers", watchers, func(d core.Duty, err error) {
			s.log.Warn("redis watchers", "duty", d.Name, "err", err)
		}))
	}
	ss = append(ss, s.background.listeners...)
	ss = append(ss, s.consumers.services()...)
	// Every instance sweeps: the database arbitrates between them.
	duties := append(s.lifecycle.Duties(), s.background.sweeps...)
	ss = append(ss, core.DutiesService("order lifecycle", duties, func(d core.Duty, err error) {
		s.log.Warn("order lifecycle", "duty", d.Name, "err", err)
	}))
	// Every instance passes every room it knows: a pass admits what the
	// rate allows since the last one, whoever made it.
	ss = append(ss, s.rooms.Service())
	ss = append(ss, s.dashboard.Service())
	ss = append(ss, core.NewService("http", func(ctx context.Context) error {
		failed := make(chan error, 1)
		clients := &clientAddresses{trusted: s.cfg.TrustedProxies}
		go func() { failed <- s.http.Listener(newPerAddressListener(ln, s.cfg.MaxConnsPerIP, clients.isTrusted)) }()
		select {
		case err := <-failed:
			return fmt.Errorf("http server: %w", err)
		case <-ctx.Done():
		}
		if err := s.http.ShutdownWithTimeout(httpDrain); err != nil {
			s.log.Warn("http shutdown", "err", err)
		}
		<-failed // Listener returns once the server is shut down
		return nil
	}))
	return ss
}

// watcherDuties are the duties that watch Redis: its clock, its eviction
// policy (on a real Redis), and what the sale's parts added (background).
func (s *Server) watcherDuties() []core.Duty {
	duties := []core.Duty{s.clock.Duty()}
	if !s.cfg.EmbeddedRedis() {
		duties = append(duties, s.evictionDuty())
	}
	return append(duties, s.background.watchers...)
}

// identityDuty asks Redis for its incarnation every second, beside the
// check on each new connection: a Redis behind a proxy can change under
// connections that stay open. A change makes every voucher verify again
// before its next use.
func (s *Server) identityDuty() core.Duty {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	last, _ := s.identity.Current(ctx) // the incarnation New met
	cancel()
	return core.Duty{Name: "redis identity", Every: time.Second, Do: func(ctx context.Context) error {
		cur, err := s.identity.Poll(ctx)
		if err != nil || cur == last {
			return nil // Redis away: the requests say so
		}
		s.log.Warn("Redis is another incarnation (restarted or failed over): every voucher is verified again before its next use",
			"was", last, "now", cur)
		last = cur
		return nil
	}}
}

// evictionCheckInterval is how often a running server looks again: a
// policy changed by an operator, a failover to a differently configured
// replica, and every eviction show within it.
const evictionCheckInterval = 5 * time.Second

// evictionDuty reads Redis's eviction policy and count, for /metrics and
// the dashboard, and logs every change.
func (s *Server) evictionDuty() core.Duty {
	last := *s.eviction.Load()
	return core.Duty{Name: "redis eviction", Every: evictionCheckInterval, Do: func(ctx context.Context) error {
		st, err := redisreserve.ReadEviction(ctx, s.rdb)
		if err != nil {
			// Redis away: the requests say so. What it says when it is
			// back is not known (a failover to a replica set otherwise):
			// the reservation checks for evictions until told.
			s.evictionIs(redisreserve.EvictionState{})
			return nil
		}
		s.metrics.redisEvicted.Set(float64(st.Evicted))
		s.metrics.redisEvicting.Set(float64(len(st.Evicting())))
		if now, before := strings.Join(st.Evicting(), ", "), strings.Join(last.Evicting(), ", "); now != before {
			s.log.Error("Redis's maxmemory-policy changed while running", "evicting_now", now, "evicting_before", before)
		}
		if st.Evicted > last.Evicted {
			// Any key may have been the sale's: a buyers hash (the script
			// catches that one itself), a stream, the day's id counter.
			s.log.Error("Redis evicted keys: the sale's state may be gone",
				"evicted", st.Evicted-last.Evicted, "evicted_total", st.Evicted)
			s.background.evicted()
		}
		last = st
		s.eviction.Store(&st)
		s.evictionIs(st)
		return nil
	}}
}

// Serve runs the server's services (the API on ln among them) until ctx is
// done or one of them fails, then stops them in order within the
// shutdown budget.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.layout != nil {
		if err := s.migrateLayout(ctx, *s.layout); err != nil {
			if ctx.Err() != nil {
				// Stopped before serving: each voucher moved in one step,
				// and the next start plans what is left.
				return nil
			}
			return fmt.Errorf("bring Redis to the key layout: %w", err)
		}
		s.layout = nil
	}
	ss := s.services(ln)
	if err := ss.Start(ctx); err != nil {
		return err
	}
	s.log.Info("serving", "addr", ln.Addr().String(), "queue", s.cfg.Queue, "consumers", s.consumers.running(), "shards", s.shards.Count())

	var err error
	select {
	case <-ctx.Done():
	case err = <-ss.Failed():
	}
	s.log.Info("shutting down")
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownBudget)
	defer cancel()
	if serr := ss.Stop(stopCtx); serr != nil {
		s.log.Warn("not everything stopped in time; unacked batches are redelivered after a restart (lost for the memory queue)", "err", serr)
	}
	return err
}
