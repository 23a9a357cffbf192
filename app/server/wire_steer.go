package server

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/redisgate"
	"github.com/seckill-lab/seckill/adapters/redislock"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/steer"
)

// newSteering builds the operators' steering of running sales: the
// database's half in the store, the live half where the sale's live state
// is, the voucher's lock in Redis, and its duty (finishing the actions an
// instance left pending) among the sweeps.
func (s *Server) newSteering(sale sale, changed func(context.Context, int64) error) *steer.Steering {
	st := steer.New(steer.Config{Store: mysqlstore.NewSteering(s.store), Live: sale.steering,
		Locker: redislock.New(s.rdb, s.cfg.KeyPrefix), Guard: s.guard,
		Announcer: voucherChanges{catalog: s.catalog, memo: s.memo, unknown: s.unknown, nudge: changed, log: s.log},
		Observer:  s.metrics, Consumers: sale.consumerBoard(s), Restock: sale.restocker(s), Log: s.log})
	s.background.sweeps = append(s.background.sweeps, st.Duty())
	s.metrics.registry.MustRegister(newPausedCollector(s.cfg.Queue, func(ctx context.Context) ([]core.Voucher, error) {
		return s.store.CurrentVouchers(ctx, time.Now(), maxPausedSeries)
	}))
	return st
}

// maxPausedSeries bounds seckill_sale_paused's series: the vouchers on sale
// or upcoming, soonest first.
const maxPausedSeries = 50

// voucherChanges tells every instance that an operator changed a voucher
// (steer.Announcer): this one forgets its details and remembered answers
// at once, the others when the nudge reaches them (or within the
// catalog's second, should it not).
type voucherChanges struct {
	catalog *core.Catalog
	memo    *core.AnswerMemo
	unknown *core.UnknownVouchers
	nudge   func(context.Context, int64) error
	log     *slog.Logger
}

func (c voucherChanges) VoucherChanged(ctx context.Context, voucherID int64) {
	c.catalog.Forget(voucherID)
	c.memo.Forget(voucherID)
	c.unknown.Forget(voucherID)
	if err := c.nudge(ctx, voucherID); err != nil {
		c.log.Warn("steer: the other instances were not told of a change; their details lapse within a second", "voucher", voucherID, "err", err)
	}
}

// pausedCollector is seckill_sale_paused{voucher}: 1 for each voucher on
// sale or upcoming that is paused, 0 for the others, from the database's
// listing, read at most once a second however often it is gathered (the
// dashboard gathers every second). Not the storefront's listing: that one
// reads each voucher's live stock, and would rebuild every voucher an
// instance has not served yet, from a metrics scrape.
type pausedCollector struct {
	list func(ctx context.Context) ([]core.Voucher, error)
	desc *prometheus.Desc

	mu     sync.Mutex
	at     time.Time
	listed []core.Voucher
}

func newPausedCollector(queue string, list func(ctx context.Context) ([]core.Voucher, error)) *pausedCollector {
	return &pausedCollector{list: list, desc: prometheus.NewDesc("seckill_sale_paused",
		"1 for a voucher on sale or upcoming whose sale an operator (or the kill switch) paused, 0 for the others.",
		[]string{"voucher"}, prometheus.Labels{"queue": queue})}
}

func (c *pausedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pausedCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) >= time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if vs, err := c.list(ctx); err == nil {
			c.listed, c.at = vs, time.Now()
		}
		cancel()
	}
	vouchers := c.listed
	c.mu.Unlock()
	for _, v := range vouchers {
		paused := 0.0
		if v.Paused() {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, paused, strconv.FormatInt(v.ID, 10))
	}
}

// consumerBoard is where an operator's hold on the consumers is written:
// Redis, where the consumers of a queue read it; none under sync.
func (sl sale) consumerBoard(s *Server) steer.ConsumerBoard {
	if !sl.inRedis {
		return steer.NoConsumers
	}
	return redisgate.New(s.rdb, s.cfg.KeyPrefix)
}

// restocker changes the stock of a voucher in buckets: the recovery
// guard's reconcile, where the sale is in Redis (none under sync, which
// has no buckets).
func (sl sale) restocker(s *Server) steer.Restocker {
	if !sl.inRedis {
		return nil
	}
	return s.recovery
}
