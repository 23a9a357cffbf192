// Package consumergate is an operator's hold on the consumers of every
// instance: paused (none takes an order from the queue, reservations go on
// and are queued) or capped (at most so many orders persisted a second, in
// all), to spare a database in trouble.
//
// The setting is kept where every instance reads it (a Board: the live
// store), from the database's copy (Truth) should the live store lose it.
// Each instance's Gate reads it every Poll and says which version it runs
// (Board.Ack); a pause counts as run once every consumer of the instance
// has finished its batches in flight and is parked, so the operator's
// answer, given once every instance has acked, means no row is written
// until the resume. The cap is one rate shared by every instance (Take).
package consumergate

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Board is where the setting is shared, with the instances' acks and the
// cap's one rate.
type Board interface {
	// Read is the setting written; ok is false when there is none (never
	// set, or the live store lost it).
	Read(ctx context.Context) (s core.ConsumerSetting, ok bool, err error)
	// Restore writes s where none is (the live store lost it).
	Restore(ctx context.Context, s core.ConsumerSetting) error
	// Ack records, with the live store's time, that instance runs version.
	Ack(ctx context.Context, instance string, version int64) error
	// Take takes n of the cap's orders (perSecond in all instances, up to
	// burst at once): 0 when taken, else how long until they may be.
	Take(ctx context.Context, perSecond, burst, n int) (time.Duration, error)
}

// Truth is the setting as the database keeps it.
type Truth interface {
	ConsumerSetting(ctx context.Context) (core.ConsumerSetting, error)
}

// Config is what a Gate needs.
type Config struct {
	Board Board
	Truth Truth
	// Instance names this process's consumers in the acks.
	Instance string
	// Poll is how often the setting is read. Default 100 ms.
	Poll time.Duration
	// Changed is told each setting this instance starts to run (a
	// metric); nil: nothing.
	Changed func(core.ConsumerSetting)
	Log     *slog.Logger
}

// Gate is one instance's side (core.ConsumerGate): it reads the setting,
// parks the consumers while paused and charges their batches to the cap.
type Gate struct {
	cfg Config
	mu  sync.Mutex
	// setting is the one this instance runs; resumed is closed while it
	// is not paused; parked counts the consumers in Hold, of consumers.
	setting   core.ConsumerSetting
	resumed   chan struct{}
	parked    int
	consumers int
}

// New builds a Gate, open until its first read.
func New(cfg Config) *Gate {
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	if cfg.Changed == nil {
		cfg.Changed = func(core.ConsumerSetting) {}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	resumed := make(chan struct{})
	close(resumed)
	return &Gate{cfg: cfg, resumed: resumed}
}

// firstRead bounds the read Runs makes before the consumers start.
const firstRead = 2 * time.Second

// Runs implements core.ConsumerGate. The setting is read once before the
// pipeline starts its consumers: an instance started while an operator
// holds the consumers paused takes nothing from the queue, not even one
// batch before its first poll. Should the read fail, the consumers start
// as the gate last knew (open), and the poll catches up.
func (g *Gate) Runs(consumers int) {
	g.mu.Lock()
	g.consumers = consumers
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), firstRead)
	defer cancel()
	if err := g.step(ctx); err != nil {
		g.cfg.Log.Warn("consumers: the operator's setting could not be read before the start; starting open", "err", err)
	}
}

// Paused implements core.ConsumerGate.
func (g *Gate) Paused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.setting.Paused
}

// Hold implements core.ConsumerGate.
func (g *Gate) Hold(ctx context.Context) {
	g.mu.Lock()
	resumed := g.resumed
	g.parked++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.parked--
		g.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
	case <-resumed:
	}
}

// burstOf is how many orders the cap lets go at once: a tenth of a
// second's worth, so the rate holds over any second.
func burstOf(perSecond int) int { return max(1, perSecond/10) }

// Batch implements core.ConsumerGate.
func (g *Gate) Batch(want int) int {
	if ps := g.perSecond(); ps > 0 {
		return min(want, burstOf(ps))
	}
	return want
}

func (g *Gate) perSecond() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.setting.PerSecond
}

// Charge implements core.ConsumerGate: n orders taken from the cap, a
// burst at a time. While the live store does not answer, a capped
// consumer waits (the cap is what protects the database).
func (g *Gate) Charge(ctx context.Context, n int) {
	for n > 0 && ctx.Err() == nil {
		ps := g.perSecond()
		if ps == 0 {
			return
		}
		part := min(n, burstOf(ps))
		wait, err := g.cfg.Board.Take(ctx, ps, burstOf(ps), part)
		if err != nil {
			g.cfg.Log.Warn("consumers: the cap's rate could not be read; waiting", "err", err)
			wait = g.cfg.Poll
		}
		if wait == 0 {
			n -= part
			continue
		}
		core.Sleep(ctx, wait)
	}
}

// Run reads the setting every Poll until ctx ends, runs it, and acks it.
func (g *Gate) Run(ctx context.Context) error {
	tick := time.NewTicker(g.cfg.Poll)
	defer tick.Stop()
	for {
		if err := g.step(ctx); err != nil && ctx.Err() == nil {
			// The last setting read goes on: consumers neither resume nor
			// pause on a read that failed.
			g.cfg.Log.Warn("consumers: the operator's setting could not be read; keeping the last", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// step is one read, run and ack.
func (g *Gate) step(ctx context.Context) error {
	s, ok, err := g.cfg.Board.Read(ctx)
	if err != nil {
		return err
	}
	if !ok {
		if s, err = g.cfg.Truth.ConsumerSetting(ctx); err != nil {
			return err
		}
		if err := g.cfg.Board.Restore(ctx, s); err != nil {
			return err
		}
	}
	return g.cfg.Board.Ack(ctx, g.cfg.Instance, g.run(s))
}

// run starts running s and returns the version this instance runs: a
// pause's only once every consumer is parked.
func (g *Gate) run(s core.ConsumerSetting) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s != g.setting {
		was := g.setting
		g.setting = s
		switch {
		case s.Paused && !was.Paused:
			g.resumed = make(chan struct{})
		case !s.Paused && was.Paused:
			close(g.resumed)
		}
		g.cfg.Changed(s)
	}
	if s.Paused && g.parked < g.consumers {
		return s.Version - 1
	}
	return s.Version
}
