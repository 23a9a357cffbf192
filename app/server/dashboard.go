package server

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	dto "github.com/prometheus/client_model/go"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/app/svgchart"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
	"github.com/seckill-lab/seckill/core/room"
)

// The dashboard's data: one snapshot a second for every viewer, made from
// the instance's own metrics and one queue-stats call, so a hundred open
// dashboards cost Redis what one does.

// dashboardInterval is how often the snapshot is made.
const dashboardInterval = time.Second

// dashboardHistory is how many intervals the charts span.
const dashboardHistory = 300

type dashboardQueue struct {
	Depth           *int64   `json:"depth"`
	Pending         *int64   `json:"pending"`
	LagMs           *float64 `json:"lagMs"`
	OldestPendingMs *float64 `json:"oldestPendingMs"`
	// DeadLetters is every letter the backend's dead stream holds (ever,
	// resolved or not); DeadLettersOpen the register's letters still to
	// be worked (an operator's figure: the one shown beside 0 open was
	// the all-time count).
	DeadLetters     *int64 `json:"deadLetters"`
	DeadLettersOpen *int64 `json:"deadLettersOpen"`
}

// dashboardRelay is an outside broker's relay (nil for the others): what
// this process forwarded, how fast, what failed, and the outbox behind it.
type dashboardRelay struct {
	Forwarded          int64    `json:"forwarded"`
	ForwardedPerSecond float64  `json:"forwardedPerSecond"`
	Failures           int64    `json:"failures"`
	LastError          string   `json:"lastError"`
	OutboxDepth        *int64   `json:"outboxDepth"`
	OutboxPending      *int64   `json:"outboxPending"`
	LagMs              *float64 `json:"lagMs"`
}

type dashboardRedis struct {
	// Evicting: the masters whose maxmemory-policy may evict keys, as
	// "address (policy)"; EvictedKeys: their evicted_keys.
	Evicting    []string `json:"evicting"`
	EvictedKeys int64    `json:"evictedKeys"`
}

type dashboardPoint struct {
	At        int64   `json:"at"` // unix seconds
	OK        float64 `json:"ok"`
	Refused   float64 `json:"refused"`
	Persisted float64 `json:"persisted"`
	Depth     int64   `json:"depth"`
}

type dashboardSnapshot struct {
	At         time.Time          `json:"at"`
	Backend    string             `json:"backend"`
	Iteration  string             `json:"iteration"`
	Guarantees map[string]bool    `json:"guarantees"`
	PerSecond  map[string]float64 `json:"perSecond"`
	Persisted  float64            `json:"persistedPerSecond"`
	LatencyMs  map[string]float64 `json:"latencyMs"`
	Totals     map[string]float64 `json:"totals"`
	Queue      dashboardQueue     `json:"queue"`
	Relay      *dashboardRelay    `json:"relay"`
	// Orders counts every order by lifecycle state, from the database.
	Orders map[string]int64 `json:"orders"`
	// Redis is what Redis says of eviction (nil on the embedded stand-in,
	// which does not tell).
	Redis   *dashboardRedis  `json:"redis"`
	History []dashboardPoint `json:"history"`
	// Warnings are settings an operator must not miss (dev codes forced
	// on real servers).
	Warnings []string `json:"warnings"`
	// Rooms are the waiting rooms this instance admits (rooms.go).
	Rooms []dashboardRoom `json:"rooms"`
}

// dashboardSources are what a snapshot reads: the backend, its declared
// guarantees (nil without a queue), the orders by state, the queue's and
// the relay's stats where the backend tells them (nil otherwise), the dead
// letters, the metrics, the rooms, and the warnings shown at the top.
type dashboardSources struct {
	backend     string
	guarantees  map[string]bool
	orderCounts interface {
		OrderCounts(ctx context.Context) (map[string]int64, error)
	}
	queueStats  core.StatsReporter // untold where the backend tells none
	relay       core.RelayReporter // untold without a relay
	deadLetters deadletters.Register
	metrics     *metrics
	roomReports func() []room.Report
	warnings    []string
}

// dashboard makes the snapshots.
type dashboard struct {
	src dashboardSources
	now func() time.Time
	// eviction is Redis's last word on eviction (nil: none yet, or
	// embedded).
	eviction func() *redisreserve.EvictionState

	mu       sync.Mutex
	snapshot dashboardSnapshot
	madeAt   time.Time
	prev     metricTotals
	// prevForwarded is the relay's count at the previous snapshot;
	// prevAdmitted each room's frontier then.
	prevForwarded int64
	prevAdmitted  map[int64]roomMark
	// history is the charts' series, one point a second (record), and
	// recorded the counters at its last point.
	history  []dashboardPoint
	recorded metricTotals
	// charts are the snapshot's charts, drawn when first asked for.
	charts map[string][]byte
}

// metricTotals are the counters a snapshot differences.
type metricTotals struct {
	at        time.Time
	results   map[string]float64
	persisted float64
	buckets   []bucket // reservation latency, cumulative
}

type bucket struct {
	upper float64 // seconds
	count float64
}

// current returns the snapshot, making a new one when the last is older
// than the interval: the first viewer of an interval pays for everyone.
func (d *dashboard) current(ctx context.Context) dashboardSnapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if !d.madeAt.IsZero() && now.Sub(d.madeAt) < dashboardInterval {
		return d.snapshot
	}
	d.snapshot, d.madeAt = d.make(ctx, now), now
	d.charts = map[string][]byte{}
	return d.snapshot
}

// dashboardCharts are the charts /api/dashboard/charts/<name> draws from
// the history, by name.
var dashboardCharts = map[string]struct {
	title  string
	series func(dashboardPoint) map[string]float64
}{
	"answers.svg":   {"Seckill answers per second", func(p dashboardPoint) map[string]float64 { return map[string]float64{"ok": p.OK, "refused": p.Refused} }},
	"persisted.svg": {"Orders persisted per second", func(p dashboardPoint) map[string]float64 { return map[string]float64{"persisted": p.Persisted} }},
	"depth.svg":     {"Queue depth", func(p dashboardPoint) map[string]float64 { return map[string]float64{"depth": float64(p.Depth)} }},
}

// chart returns the named chart of the current snapshot, drawn once per
// snapshot for every viewer.
func (d *dashboard) chart(ctx context.Context, name string) ([]byte, bool, error) {
	spec, ok := dashboardCharts[name]
	if !ok {
		return nil, false, nil
	}
	s := d.current(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if svg, ok := d.charts[name]; ok {
		return svg, true, nil
	}
	points := s.History
	if len(points) < 2 { // a line needs two points
		points = append([]dashboardPoint{{At: s.At.Unix() - 1}}, points...)
	}
	labels := make([]string, len(points))
	values := map[string][]float64{}
	var names []string
	for i, p := range points {
		labels[i] = time.Unix(p.At, 0).UTC().Format("15:04:05")
		for name, v := range spec.series(p) {
			if _, seen := values[name]; !seen {
				names = append(names, name)
			}
			values[name] = append(values[name], v)
		}
	}
	sort.Strings(names)
	series := make([]svgchart.Series, len(names))
	for i, n := range names {
		series[i] = svgchart.Series{Name: n, Values: values[n]}
	}
	svg, err := svgchart.Lines(spec.title, labels, series, 640, 280)
	if err != nil {
		return nil, true, err
	}
	d.charts[name] = svg
	return svg, true, nil
}

// chartPolicy lets a chart style itself with its own style attributes,
// and do nothing else: no script, no fetch.
const chartPolicy = "default-src 'none'; style-src 'unsafe-inline'"

func (a *operatorRoutes) dashboardChart(c *fiber.Ctx) error {
	svg, found, err := a.dashboard.chart(c.UserContext(), c.Params("name"))
	if !found {
		return fiber.ErrNotFound
	}
	if err != nil {
		return core.Wrap("dashboard chart", core.CodeInternal, err)
	}
	c.Set(fiber.HeaderContentType, "image/svg+xml")
	c.Set(fiber.HeaderContentSecurityPolicy, chartPolicy)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Send(svg)
}

func (d *dashboard) make(ctx context.Context, now time.Time) dashboardSnapshot {
	a := &d.src
	cur := gatherTotals(a.metrics, now)
	s := dashboardSnapshot{At: now.UTC(), Backend: a.backend, PerSecond: map[string]float64{}, LatencyMs: map[string]float64{},
		Totals: map[string]float64{}, Warnings: append([]string{}, a.warnings...)}
	if b, ok := lookupBackend(a.backend); ok {
		s.Iteration = b.Iteration
	}
	if e := d.eviction(); e != nil { // read at least once (on a real Redis)
		s.Redis = &dashboardRedis{Evicting: e.Evicting(), EvictedKeys: e.Evicted}
	}
	s.Guarantees = a.guarantees
	for code, n := range cur.results {
		s.Totals[code] = n
	}
	s.Totals["persisted"] = cur.persisted
	if elapsed := cur.at.Sub(d.prev.at).Seconds(); !d.prev.at.IsZero() && elapsed > 0 {
		for code, n := range cur.results {
			s.PerSecond[code] = (n - d.prev.results[code]) / elapsed
		}
		s.Persisted = (cur.persisted - d.prev.persisted) / elapsed
		for _, q := range []struct {
			name string
			q    float64
		}{{"p50", .5}, {"p90", .9}, {"p99", .99}} {
			if v, has := quantile(d.prev.buckets, cur.buckets, q.q); has {
				s.LatencyMs[q.name] = v * 1000
			}
		}
	}
	if counts, err := a.orderCounts.OrderCounts(ctx); err == nil {
		s.Orders = counts
	}
	if st, err := a.queueStats.Stats(ctx); err == nil {
		s.Queue = dashboardQueue{Depth: known(st.Depth), Pending: known(st.Pending), LagMs: knownMs(st.Lag),
			OldestPendingMs: knownMs(st.OldestPending), DeadLetters: known(st.DeadLetters)}
	}
	if open, err := a.deadLetters.Open(ctx); err == nil {
		s.Queue.DeadLettersOpen = &open
	}
	if st, err := a.relay.RelayStats(ctx); err == nil {
		r := &dashboardRelay{Forwarded: st.Forwarded, Failures: st.Failures, LastError: st.LastError,
			OutboxDepth: known(st.Outbox.Depth), OutboxPending: known(st.Outbox.Pending), LagMs: knownMs(st.Outbox.Lag)}
		if elapsed := cur.at.Sub(d.prev.at).Seconds(); !d.prev.at.IsZero() && elapsed > 0 {
			r.ForwardedPerSecond = float64(st.Forwarded-d.prevForwarded) / elapsed
		}
		d.prevForwarded = st.Forwarded
		s.Relay = r
	}
	d.prev = cur
	s.Rooms = d.roomsNow()
	s.History = append([]dashboardPoint(nil), d.history...)
	return s
}

// Service records the charts' series once a second from the start,
// whether or not a dashboard is open (they were recorded only while one
// was: a 96 s gap drawn as one step, a burst of six orders as 0.05 a
// second). A point costs this instance's counters and one queue-stats
// read, what one viewer's snapshot costs.
func (d *dashboard) Service() core.Service {
	return core.NewService("dashboard series", func(ctx context.Context) error {
		t := time.NewTicker(dashboardInterval)
		defer t.Stop()
		for {
			d.record(ctx, d.now())
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	})
}

// record adds the point at now: the answers' and persisted orders' rates
// since the last point, and the queue's depth.
func (d *dashboard) record(ctx context.Context, now time.Time) {
	cur := gatherTotals(d.src.metrics, now)
	point := dashboardPoint{At: now.Unix()}
	if prev := d.recorded; !prev.at.IsZero() && cur.at.After(prev.at) {
		elapsed := cur.at.Sub(prev.at).Seconds()
		for code, n := range cur.results {
			if rate := (n - prev.results[code]) / elapsed; code == "ok" {
				point.OK = rate
			} else {
				point.Refused += rate
			}
		}
		point.Persisted = (cur.persisted - prev.persisted) / elapsed
	}
	if st, err := d.src.queueStats.Stats(ctx); err == nil {
		point.Depth = max(st.Depth, 0)
	}
	d.recorded = cur
	d.mu.Lock()
	defer d.mu.Unlock()
	d.history = append(d.history, point)
	if len(d.history) > dashboardHistory {
		d.history = d.history[len(d.history)-dashboardHistory:]
	}
}

func known(n int64) *int64 {
	if n < 0 {
		return nil
	}
	return &n
}

func knownMs(d time.Duration) *float64 {
	if d < 0 {
		return nil
	}
	ms := float64(d) / float64(time.Millisecond)
	return &ms
}

// gatherTotals reads the counters from the instance's own registry.
func gatherTotals(m *metrics, now time.Time) metricTotals {
	t := metricTotals{at: now, results: map[string]float64{}}
	families, err := m.registry.Gather()
	if err != nil {
		return t
	}
	for _, f := range families {
		switch f.GetName() {
		case "seckill_requests_total":
			for _, m := range f.GetMetric() {
				t.results[label(m, "code")] += m.GetCounter().GetValue()
			}
		case "seckill_orders_persisted_total":
			for _, m := range f.GetMetric() {
				t.persisted += m.GetCounter().GetValue()
			}
		case "seckill_reservation_seconds":
			for _, m := range f.GetMetric() {
				for _, b := range m.GetHistogram().GetBucket() {
					t.buckets = append(t.buckets, bucket{upper: b.GetUpperBound(), count: float64(b.GetCumulativeCount())})
				}
				t.buckets = append(t.buckets, bucket{upper: math.Inf(1), count: float64(m.GetHistogram().GetSampleCount())})
			}
		}
	}
	sort.Slice(t.buckets, func(i, j int) bool { return t.buckets[i].upper < t.buckets[j].upper })
	return t
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// quantile estimates the q-quantile of the observations made between two
// readings of a cumulative histogram, interpolating within the bucket it
// falls in (as Prometheus's histogram_quantile does).
func quantile(before, after []bucket, q float64) (float64, bool) {
	if len(after) == 0 {
		return 0, false
	}
	delta := make([]float64, len(after))
	for i, b := range after {
		delta[i] = b.count
		if i < len(before) && before[i].upper == b.upper {
			delta[i] -= before[i].count
		}
	}
	total := delta[len(delta)-1]
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	lowerBound, lowerCount := 0.0, 0.0
	for i, b := range after {
		if delta[i] >= rank {
			if math.IsInf(b.upper, 1) {
				return lowerBound, true // beyond the last bound: the last bound is all that is known
			}
			inBucket := delta[i] - lowerCount
			if inBucket <= 0 {
				return b.upper, true
			}
			return lowerBound + (b.upper-lowerBound)*(rank-lowerCount)/inBucket, true
		}
		lowerBound, lowerCount = b.upper, delta[i]
	}
	return lowerBound, true
}

func (a *operatorRoutes) dashboardData(c *fiber.Ctx) error {
	return c.JSON(a.dashboard.current(c.UserContext()))
}
