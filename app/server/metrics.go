package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
	"github.com/seckill-lab/seckill/core/recovery"
	"github.com/seckill-lab/seckill/core/steer"
)

// metrics are the Prometheus series of one server, by what they measure.
// Each server has its own registry, so tests can run several in one
// process.
type metrics struct {
	registry *prometheus.Registry
	requestMetrics
	pipelineMetrics
	liveMetrics
	lifecycleMetrics
	steeringMetrics
}

// requestMetrics are the requests': seckills and logins.
type requestMetrics struct {
	seckillResults *prometheus.CounterVec
	seckillOK      prometheus.Counter // seckillResults{code="ok"}, resolved once for the hot path
	// seckillRefused: seckillResults of the answers in refusals, resolved
	// once too.
	seckillRefused map[core.Code]prometheus.Counter
	reserveSeconds prometheus.Histogram
	// codesSent counts login codes by what became of them: sent (the
	// sender took it), failed (the sender gave up: the shopper got 503).
	codesSent *prometheus.CounterVec
	// logins counts login attempts by verdict.
	logins *prometheus.CounterVec
}

// pipelineMetrics are the queue's and the consumers'.
type pipelineMetrics struct {
	ordersPersisted prometheus.Counter
	ordersDuplicate prometheus.Counter
	batchSize       prometheus.Histogram
	persistSeconds  prometheus.Histogram
	deadLetters     *prometheus.CounterVec
	storeFailures   prometheus.Counter
	queueFailures   *prometheus.CounterVec
	publishedToNone prometheus.Counter
}

// liveMetrics are the live store's: rebuilds, eviction, the drift audit.
type liveMetrics struct {
	rebuilds      *prometheus.CounterVec
	rebuiltOrders *prometheus.CounterVec
	// redisEvicted is the masters' evicted_keys; redisEvicting counts the
	// masters whose maxmemory-policy may evict (watchEviction).
	redisEvicted  prometheus.Gauge
	redisEvicting prometheus.Gauge
	// unitsUnheld and unheldVouchers are the drift audit's: units the live
	// stock lacks that nothing accounts for, and on how many vouchers.
	unitsUnheld, unheldVouchers prometheus.Gauge
}

// lifecycleMetrics are the orders' after the reservation.
type lifecycleMetrics struct {
	// cancelled counts orders cancelled, by reason; unitsReturned the
	// units the live store got back (a unit a rebuild gave back instead is
	// not counted: nothing was returned twice).
	cancelled     *prometheus.CounterVec
	unitsReturned prometheus.Counter
	// deadLettersResolved counts the dead letters this process resolved,
	// by how (deadletters.Resolution).
	deadLettersResolved *prometheus.CounterVec
	// paymentsReconciled counts the payments the reconciliation asked the
	// provider about, by what its word did.
	paymentsReconciled *prometheus.CounterVec
}

// handler serves the series in Prometheus's text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

func newMetrics(queue string) *metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(c prometheus.Collector) prometheus.Collector { r.MustRegister(c); return c }
	labels := prometheus.Labels{"queue": queue}
	m := &metrics{registry: r}
	m.seckillResults = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_requests_total", Help: "Seckill requests by result code (ok or the error code).", ConstLabels: labels,
	}, []string{"code"})).(*prometheus.CounterVec)
	m.seckillOK = m.seckillResults.WithLabelValues("ok")
	m.redisEvicted = f(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_redis_evicted_keys", Help: "Keys Redis evicted (evicted_keys, summed over the masters): any rise may have deleted sale state.", ConstLabels: labels,
	})).(prometheus.Gauge)
	m.redisEvicting = f(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_redis_evicting_masters", Help: "Redis masters whose maxmemory-policy is not noeviction.", ConstLabels: labels,
	})).(prometheus.Gauge)
	m.codesSent = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_login_codes_total", Help: "Login codes by outcome: sent, failed (the sender gave up; the shopper was answered 503 busy), dev (returned in the response).", ConstLabels: labels,
	}, []string{"result"})).(*prometheus.CounterVec)
	m.logins = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_logins_total", Help: "Judged login attempts by verdict: ok, wrong, burned (the last allowed wrong guess), no_code.", ConstLabels: labels,
	}, []string{"verdict"})).(*prometheus.CounterVec)
	m.seckillRefused = map[core.Code]prometheus.Counter{}
	for _, r := range refusals {
		m.seckillRefused[r.code] = m.seckillResults.WithLabelValues(string(r.code))
	}
	m.reserveSeconds = f(prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "seckill_reservation_seconds", Help: "Time to reserve (ID, script, hand-off).", ConstLabels: labels,
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})).(prometheus.Histogram)
	m.ordersPersisted = f(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_orders_persisted_total", Help: "Orders inserted into the database, by the consumers or a dead letters' re-drive.", ConstLabels: labels,
	})).(prometheus.Counter)
	m.ordersDuplicate = f(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_orders_duplicate_total", Help: "Redelivered orders found already persisted.", ConstLabels: labels,
	})).(prometheus.Counter)
	m.batchSize = f(prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "seckill_consumer_batch_size", Help: "Deliveries per fetched batch.", ConstLabels: labels,
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})).(prometheus.Histogram)
	m.persistSeconds = f(prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "seckill_persist_seconds", Help: "Time of one batch transaction.", ConstLabels: labels,
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})).(prometheus.Histogram)
	m.deadLetters = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_dead_letters_total", Help: "Messages moved to the dead-letter destination, by reason.", ConstLabels: labels,
	}, []string{"reason"})).(*prometheus.CounterVec)
	m.storeFailures = f(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_store_failures_total", Help: "Failed batch transactions (retried).", ConstLabels: labels,
	})).(prometheus.Counter)
	m.queueFailures = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_consumer_errors_total", Help: "Failed queue operations of consumers, by operation.", ConstLabels: labels,
	}, []string{"op"})).(*prometheus.CounterVec)
	m.publishedToNone = f(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_published_unheard_total", Help: "Orders published with no subscriber listening (pubsub): reserved, never persisted.", ConstLabels: labels,
	})).(prometheus.Counter)
	m.rebuilds = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_rebuilds_total", Help: "Vouchers whose Redis state was rebuilt from the database and the queue, by result (ok, failed).", ConstLabels: labels,
	}, []string{"result"})).(*prometheus.CounterVec)
	m.rebuiltOrders = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_rebuilt_orders_total", Help: "Orders a rebuild counted, by where it found them (persisted, held_unpersisted: queued or in flight, not yet in the database).", ConstLabels: labels,
	}, []string{"source"})).(*prometheus.CounterVec)
	m.lifecycleMetrics = newLifecycleMetrics(f, labels)
	m.unitsUnheld = f(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_units_unheld", Help: "Units the live stock lacks that neither the database nor the queue accounts for (reserved for orders nobody holds, e.g. dead letters), found by the drift audit twice running on the vouchers on sale.", ConstLabels: labels,
	})).(prometheus.Gauge)
	m.unheldVouchers = f(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_units_unheld_vouchers", Help: "Vouchers on sale with units nobody holds (seckill_units_unheld).", ConstLabels: labels,
	})).(prometheus.Gauge)
	m.steeringMetrics = newSteeringMetrics(f, labels)
	return m
}

// newLifecycleMetrics registers the lifecycle's and the payments' series.
func newLifecycleMetrics(f func(prometheus.Collector) prometheus.Collector, labels prometheus.Labels) (m lifecycleMetrics) {
	m.cancelled = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_orders_cancelled_total", Help: "Orders cancelled, by reason (expired: unpaid past payBy; shopper): each unit went back on sale.", ConstLabels: labels,
	}, []string{"reason"})).(*prometheus.CounterVec)
	m.unitsReturned = f(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_units_returned_total", Help: "Units of cancelled orders given back to Redis's stock.", ConstLabels: labels,
	})).(prometheus.Counter)
	m.deadLettersResolved = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_dead_letters_resolved_total", Help: "Dead letters this process resolved, by how: redriven, persisted (the order was in the database already), discarded.", ConstLabels: labels,
	}, []string{"how"})).(*prometheus.CounterVec)
	m.paymentsReconciled = f(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_payments_reconciled_total", Help: "Payments the reconciliation asked the provider about, by what its word did: paid, refunded, failed, already_recorded, pending (nothing yet), error (not answered).", ConstLabels: labels,
	}, []string{"result"})).(*prometheus.CounterVec)
	return m
}

// steeringMetrics are the operators' actions on running sales.
type steeringMetrics struct {
	operatorActions *prometheus.CounterVec
	// consumersPaused is 1 while this instance's consumers run a pause,
	// consumersCap the orders a second they are capped at in all (0: no
	// cap).
	consumersPaused, consumersCap prometheus.Gauge
}

func newSteeringMetrics(f func(prometheus.Collector) prometheus.Collector, labels prometheus.Labels) steeringMetrics {
	return steeringMetrics{
		operatorActions: f(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_operator_actions_total", Help: "Operators' actions on running sales, by action (pause, resume, end, reschedule, …), counted once done on the live state.", ConstLabels: labels,
		}, []string{"action"})).(*prometheus.CounterVec),
		consumersPaused: f(prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_consumers_paused", Help: "1 while an operator holds this instance's consumers paused (orders wait in the queue), else 0.", ConstLabels: labels,
		})).(prometheus.Gauge),
		consumersCap: f(prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_consumers_cap_per_second", Help: "The orders a second an operator caps persistence at, in all instances (0: no cap).", ConstLabels: labels,
		})).(prometheus.Gauge),
	}
}

// ConsumersRun is told each setting this instance's consumers start to run.
func (m *steeringMetrics) ConsumersRun(s core.ConsumerSetting) {
	paused := 0.0
	if s.Paused {
		paused = 1
	}
	m.consumersPaused.Set(paused)
	m.consumersCap.Set(float64(s.PerSecond))
}

// Acted implements steer.Observer.
func (m *steeringMetrics) Acted(kind steer.Kind) {
	m.operatorActions.WithLabelValues(string(kind)).Inc()
}

// The lifecycle's events, as core.LifecycleObserver.
func (m *metrics) Cancelled(reason core.CancelReason) {
	m.cancelled.WithLabelValues(string(reason)).Inc()
}
func (m *metrics) UnitReturned() { m.unitsReturned.Inc() }

// Reconciled implements payreconcile.Observer.
func (m *metrics) Reconciled(res core.NoticeResult, failed bool) {
	label := string(res)
	switch {
	case failed:
		label = "error"
	case res == "":
		label = "pending"
	}
	m.paymentsReconciled.WithLabelValues(label).Inc()
}

// UnitsUnheld is the drift audit's report (recovery.DriftWatch).
func (m *metrics) UnitsUnheld(units int64, vouchers int) {
	m.unitsUnheld.Set(float64(units))
	m.unheldVouchers.Set(float64(vouchers))
}

// DeadLettersResolved implements deadletters.Observer.
// OrdersRedriven implements deadletters.Observer: a re-drive's inserts
// are orders persisted like the consumers'.
func (m *metrics) OrdersRedriven(res core.SaveResult) {
	m.ordersPersisted.Add(float64(res.Created))
	m.ordersDuplicate.Add(float64(res.Duplicates))
}

func (m *metrics) DeadLettersResolved(how deadletters.Resolution, n int) {
	m.deadLettersResolved.WithLabelValues(string(how)).Add(float64(n))
}

// Recovery's events, as recovery.Observer.

func (m *metrics) Rebuilt(r recovery.Report) {
	m.rebuilds.WithLabelValues("ok").Inc()
	m.rebuiltOrders.WithLabelValues("persisted").Add(float64(r.Persisted))
	m.rebuiltOrders.WithLabelValues("held_unpersisted").Add(float64(r.HeldOnly))
}

func (m *metrics) RebuildFailed(int64, error) { m.rebuilds.WithLabelValues("failed").Inc() }

var _ recovery.Observer = (*metrics)(nil)

// The pipeline's events, as core.PipelineObserver.

func (m *metrics) BatchFetched(n int) { m.batchSize.Observe(float64(n)) }

func (m *metrics) BatchPersisted(res core.SaveResult, took time.Duration) {
	m.ordersPersisted.Add(float64(res.Created))
	m.ordersDuplicate.Add(float64(res.Duplicates))
	m.persistSeconds.Observe(took.Seconds())
}

func (m *metrics) DeadLettered(reason core.DeadLetterReason) {
	m.deadLetters.WithLabelValues(string(reason)).Inc()
}

func (m *metrics) StoreFailed(error) { m.storeFailures.Inc() }

func (m *metrics) QueueFailed(op string, _ error) { m.queueFailures.WithLabelValues(op).Inc() }

var _ core.PipelineObserver = (*metrics)(nil)

// queueCollector asks the queue for its state at each scrape, so the
// gauges are never stale and cost nothing between scrapes.
type queueCollector struct {
	stats                             core.StatsReporter
	onError                           func(error)
	depth, pending, lag, oldest, dead *prometheus.Desc
}

func newQueueCollector(queue string, stats core.StatsReporter, onError func(error)) *queueCollector {
	labels := prometheus.Labels{"queue": queue}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, labels) }
	return &queueCollector{
		stats:   stats,
		onError: onError,
		depth:   d("seckill_queue_depth", "Messages waiting, not yet delivered to a consumer."),
		pending: d("seckill_queue_pending", "Messages delivered and not yet acknowledged."),
		lag:     d("seckill_queue_lag_seconds", "Time between the newest message and the consumers' position."),
		oldest:  d("seckill_queue_oldest_pending_seconds", "Age of the oldest unacknowledged message."),
		dead:    d("seckill_queue_dead_letters", "Messages in the dead-letter destination."),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.pending, c.lag, c.oldest, c.dead} {
		ch <- d
	}
}

// Collect emits only what the backend knows (see core.QueueStats).
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := c.stats.Stats(ctx)
	if err != nil {
		c.onError(err)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, known bool) {
		if known {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
		}
	}
	gauge(c.depth, float64(s.Depth), s.Depth >= 0)
	gauge(c.pending, float64(s.Pending), s.Pending >= 0)
	gauge(c.lag, s.Lag.Seconds(), s.Lag >= 0)
	gauge(c.oldest, s.OldestPending.Seconds(), s.OldestPending >= 0)
	gauge(c.dead, float64(s.DeadLetters), s.DeadLetters >= 0)
}

// relayCollector reports an outside broker's relay (core.RelayReporter) at
// each scrape: what it forwarded and failed, and the outbox behind it.
type relayCollector struct {
	relay                                    core.RelayReporter
	onError                                  func(error)
	forwarded, failures, depth, pending, lag *prometheus.Desc
}

func newRelayCollector(queue string, r core.RelayReporter, onError func(error)) *relayCollector {
	labels := prometheus.Labels{"queue": queue}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, labels) }
	return &relayCollector{
		relay:     r,
		onError:   onError,
		forwarded: d("seckill_relay_forwarded_total", "Orders this process's relays forwarded to the broker and the broker confirmed."),
		failures:  d("seckill_relay_failures_total", "Forwards the broker did not confirm (each batch retried) and failed outbox operations, in this process."),
		depth:     d("seckill_relay_outbox_depth", "Outbox entries no relay has read yet (every process's)."),
		pending:   d("seckill_relay_outbox_pending", "Outbox entries a relay read and the broker has not confirmed yet."),
		lag:       d("seckill_relay_lag_seconds", "Time between the newest reservation in the outbox and the relays' position."),
	}
}

func (c *relayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.forwarded, c.failures, c.depth, c.pending, c.lag} {
		ch <- d
	}
}

func (c *relayCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := c.relay.RelayStats(ctx)
	if err != nil {
		c.onError(err)
	}
	ch <- prometheus.MustNewConstMetric(c.forwarded, prometheus.CounterValue, float64(s.Forwarded))
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(s.Failures))
	gauge := func(d *prometheus.Desc, v float64, known bool) {
		if known && err == nil {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
		}
	}
	gauge(c.depth, float64(s.Outbox.Depth), s.Outbox.Depth >= 0)
	gauge(c.pending, float64(s.Outbox.Pending), s.Outbox.Pending >= 0)
	gauge(c.lag, s.Outbox.Lag.Seconds(), s.Outbox.Lag >= 0)
}

// deadLetterCollector reports the dead-letter register at each scrape: the
// letters still open, across every instance (the register is the
// database's).
type deadLetterCollector struct {
	register deadletters.Register
	onError  func(error)
	open     *prometheus.Desc
}

func newDeadLetterCollector(queue string, r deadletters.Register, onError func(error)) *deadLetterCollector {
	return &deadLetterCollector{register: r, onError: onError, open: prometheus.NewDesc("seckill_dead_letters_open",
		"Dead letters not yet re-driven or discarded (the register's, every instance's).", nil, prometheus.Labels{"queue": queue})}
}

func (c *deadLetterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.open }

func (c *deadLetterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.register.Open(ctx)
	if err != nil {
		c.onError(err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(n))
}

// clockCollector reads the measured offset of Redis's clock at each
// scrape (redisclock: the sale judges time on Redis's clock; past a
// second off, the instance is warned of).
type clockCollector struct {
	offset func() time.Duration
	desc   *prometheus.Desc
}

func newClockCollector(queue string, offset func() time.Duration) *clockCollector {
	return &clockCollector{offset: offset, desc: prometheus.NewDesc("seckill_redis_clock_offset_seconds",
		"Redis's clock less this instance's, as last measured (the sale judges time on Redis's; past a second the instance is warned of).",
		nil, prometheus.Labels{"queue": queue})}
}

func (c *clockCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *clockCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, c.offset().Seconds())
}
