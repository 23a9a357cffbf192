package server

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
	"github.com/seckill-lab/seckill/core/room"
)

type countingStats struct{ calls int }

func (c *countingStats) Stats(context.Context) (core.QueueStats, error) {
	c.calls++
	return core.QueueStats{Depth: 7, Pending: 2, Lag: -1, OldestPending: 1500 * time.Millisecond, DeadLetters: 0}, nil
}

// noOrderCounts is a database that counts no orders.
type noOrderCounts struct{}

func (noOrderCounts) OrderCounts(context.Context) (map[string]int64, error) { return nil, nil }

// neverRead is Redis's eviction policy, never read (the stand-ins).
func neverRead() *redisreserve.EvictionState { return nil }

// registerWithOpen is a register with n letters open.
type registerWithOpen struct {
	deadletters.Register
	n int64
}

func (o registerWithOpen) Open(context.Context) (int64, error) { return o.n, nil }

// TestTheDashboardIsMadeOnceAnInterval: a hundred viewers in one interval
// cost one queue-stats call; the next interval makes a new snapshot whose
// rates are the counters' movement over it; the open dead letters are the
// register's.
func TestTheDashboardIsMadeOnceAnInterval(t *testing.T) {
	stats := &countingStats{}
	src := dashboardSources{metrics: newMetrics("streamgroup"), queueStats: stats, backend: "streamgroup", deadLetters: registerWithOpen{n: 3},
		roomReports: func() []room.Report { return nil }, relay: untold{}, orderCounts: noOrderCounts{}}
	now := time.Unix(1_800_000_000, 0)
	d := &dashboard{src: src, now: func() time.Time { return now }, eviction: neverRead}
	for range 100 {
		d.current(context.Background())
	}
	if stats.calls != 1 {
		t.Fatalf("100 viewers in an interval made %d queue-stats calls, want 1", stats.calls)
	}
	for range 30 {
		src.metrics.seckillOK.Inc()
		src.metrics.reserveSeconds.Observe(0.002)
	}
	src.metrics.seckillRefused[core.CodeSoldOut].Add(10)
	now = now.Add(2 * time.Second)
	s := d.current(context.Background())
	if stats.calls != 2 || s.PerSecond["ok"] != 15 || s.PerSecond["sold_out"] != 5 {
		t.Fatalf("the next interval: %d stats calls, per second %v; want 2 calls, ok 15 and sold_out 5", stats.calls, s.PerSecond)
	}
	if p50 := s.LatencyMs["p50"]; p50 <= 1 || p50 > 2.5 {
		t.Fatalf("p50 %.3f ms for observations of 2 ms", p50)
	}
	if *s.Queue.Depth != 7 || s.Queue.LagMs != nil || *s.Queue.OldestPendingMs != 1500 || *s.Queue.DeadLettersOpen != 3 {
		t.Fatalf("queue %+v: want depth 7, lag unknown (null), oldest pending 1500 ms, 3 letters open", s.Queue)
	}
}

// TestTheChartsAreRecordedWhetherOrNotAnyoneWatches: the series gets a
// point a second from the recorder, none from the viewers; a burst of
// orders between two points is its rate over that second, not over the
// time since someone last looked.
func TestTheChartsAreRecordedWhetherOrNotAnyoneWatches(t *testing.T) {
	src := dashboardSources{metrics: newMetrics("streamgroup"), queueStats: &countingStats{}, backend: "streamgroup", deadLetters: registerWithOpen{},
		roomReports: func() []room.Report { return nil }, relay: untold{}, orderCounts: noOrderCounts{}}
	now := time.Unix(1_800_000_000, 0)
	d := &dashboard{src: src, now: func() time.Time { return now }, eviction: neverRead}
	for i := range 120 {
		if i == 100 {
			src.metrics.seckillOK.Add(6)
		}
		d.record(context.Background(), now)
		now = now.Add(time.Second)
	}
	s := d.current(context.Background())
	if len(s.History) != 120 || s.History[100].OK != 6 || s.History[99].OK != 0 || s.History[101].OK != 0 || s.History[50].Depth != 7 {
		t.Fatalf("%d points, at 99..101: %+v", len(s.History), s.History[99:102])
	}
	d.current(context.Background())
	if got := d.current(context.Background()).History; len(got) != 120 {
		t.Fatalf("viewers added points: %d", len(got))
	}
}

func TestQuantileInterpolatesWithinABucket(t *testing.T) {
	before := []bucket{{0.001, 0}, {0.01, 0}, {math.Inf(1), 0}}
	after := []bucket{{0.001, 0}, {0.01, 100}, {math.Inf(1), 100}}
	if q, ok := quantile(before, after, 0.5); !ok || math.Abs(q-0.0055) > 1e-9 {
		t.Fatalf("median of 100 in (1 ms, 10 ms]: %v %v, want 5.5 ms", q, ok)
	}
	if _, ok := quantile(after, after, 0.5); ok {
		t.Fatal("a quantile of no observations")
	}
}

// TestTheDashboardMovesInABrowser: /dashboard shows the backend, and its
// counters follow a small sale, with no console error or failed request.
func TestTheDashboardMovesInABrowser(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		b := newBrowser(t)
		p := b.page()
		b.open(p, "open /dashboard", h.base+"/dashboard")
		b.waitJS(p, "the figures wait for the token", `document.getElementById('dashboard-message').textContent.includes('admin token')`)
		b.input(p, "#admin-token", h.cfg.AdminToken)
		b.waitJS(p, "the backend is shown", `document.getElementById('backend').textContent === '`+h.cfg.Queue+`'`)
		voucher := h.openVoucher(3)
		for u := int64(1); u <= 5; u++ {
			if status, _ := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status != http.StatusOK && status != http.StatusConflict {
				t.Fatalf("seckill: %d", status)
			}
		}
		h.waitForRows(voucher, 3, 10*time.Second)
		b.waitJS(p, "the totals show the sale", `(() => { const ok = document.querySelector('#totals dd[data-figure="ok"]');
			const sold = document.querySelector('#totals dd[data-figure="sold_out"]');
			const kept = document.querySelector('#totals dd[data-figure="persisted"]');
			return ok && sold && kept && ok.textContent === '3' && sold.textContent === '2' && kept.textContent === '3'; })()`)
		b.waitJS(p, "the charts are drawn", `['answers', 'persisted', 'depth'].every((n) => {
			const img = document.getElementById('chart-' + n); return img.complete && img.naturalWidth > 0; })`)
		b.waitJS(p, "the operator's voucher list shows the sale", `(() => { const tr = document.querySelector('#voucher-table tr[data-voucher="`+idString(voucher)+`"]');
			return tr && [...tr.cells].map((c) => c.textContent).slice(2, 6).join(',') === 'on sale,0,3,0'; })()`)
		guarantees := b.text(p, "#guarantees")
		if !strings.Contains(guarantees, "acknowledged") {
			t.Fatalf("the guarantees shown: %q", guarantees)
		}
		b.screenshot(p, "dashboard-desktop", 1280, 800, false)
		// At 1280 px the charts are large enough to read (three in a row
		// were under 300 px each) and the voucher table is not cut.
		b.waitJS(p, "charts at least 500 px wide, the table whole", `document.getElementById('chart-answers').getBoundingClientRect().width >= 500 &&
			document.querySelector('.table-wrap').scrollWidth <= document.querySelector('.table-wrap').clientWidth`)
		b.screenshot(p, "dashboard-phone", 390, 844, true)
		b.clean()
	})
}

// TestTheDashboardChartsAreSVGDrawnOnceASnapshot: a chart is an SVG of
// the history, served with a policy that lets it style itself and nothing
// more; an unknown chart is 404.
func TestTheDashboardChartsAreSVGDrawnOnceASnapshot(t *testing.T) {
	h := startServer(t, "embedded", nil)
	voucher := h.openVoucher(2)
	for u := int64(1); u <= 3; u++ {
		h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
	}
	get := func(path, token string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", h.base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return h.client.Do(req)
	}
	for _, path := range []string{"/api/dashboard", "/api/dashboard/charts/answers.svg"} {
		resp, err := get(path, "")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("%s without the admin token: %d, want 401 (the operator's figures)", path, resp.StatusCode)
		}
	}
	for _, name := range []string{"answers", "persisted", "depth"} {
		resp, err := get("/api/dashboard/charts/"+name+".svg", h.cfg.AdminToken)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(string(body), "<svg") ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("%s: %d %q %q %.80s", name, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Security-Policy"), body)
		}
	}
	resp, err := get("/api/dashboard/charts/secrets.svg", h.cfg.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("an unknown chart: %d, want 404", resp.StatusCode)
	}
}

// TestTheDashboardsOperatorActions: with the admin token the dashboard
// creates a voucher (which the storefront then lists) and audits it; with
// a wrong token it is refused.
func TestTheDashboardsOperatorActions(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		b := newBrowser(t)
		p := b.page()
		b.open(p, "open /dashboard", h.base+"/dashboard")
		b.input(p, "#admin-token", "wrong-token")
		b.input(p, "#new-title", "Operator's <b>voucher</b>")
		b.click(p, "#create-voucher")
		b.waitJS(p, "the wrong token is refused", `document.getElementById('admin-result').textContent.startsWith('401')`)

		b.must("clear the token", p.MustElement("#admin-token").SelectAllText())
		b.input(p, "#admin-token", h.cfg.AdminToken)
		// The figures fill the page once the token is good: the click waits
		// for that, or it can land where the button was before they did.
		b.waitJS(p, "the figures are shown", `document.getElementById('backend').textContent === '`+h.cfg.Queue+`' && document.getElementById('voucher-table').dataset.loaded === '1'`)
		b.click(p, "#create-voucher")
		b.waitJS(p, "the voucher is created", `document.getElementById('admin-result').textContent.startsWith('201')`)
		status, body := h.do("GET", "/api/vouchers", "", nil)
		listed, _ := body["vouchers"].([]any)
		if status != 200 || len(listed) != 1 || listed[0].(map[string]any)["title"] != "Operator's <b>voucher</b>" {
			t.Fatalf("the storefront's listing after the dashboard created a voucher: %d %v", status, body)
		}
		id := idString(int64(listed[0].(map[string]any)["id"].(float64)))
		b.input(p, "#audit-id", id)
		b.click(p, "#audit")
		b.waitJS(p, "the audit is shown", `(() => { const t = document.getElementById('admin-result').textContent;
			return t.startsWith('200') && t.includes('"voucherId": `+id+`'); })()`)

		// The voucher's row steers its sale: pause (a seckill is then
		// refused, paused), units added, resume; the record lists them.
		row := `#voucher-table tr[data-voucher="` + id + `"]`
		b.waitJS(p, "the voucher's row has its buttons", `document.querySelector('`+row+` .steer.pause') !== null`)
		// Clicked from the page's own script, in the step that finds the
		// button: the table is redrawn every few seconds.
		press := func(what string) {
			b.waitJS(p, "press "+what, `(() => { const x = document.querySelector('`+row+` .steer.`+what+`'); if (!x) return false; x.click(); return true; })()`)
		}
		press("pause")
		b.waitJS(p, "the row says paused", `document.querySelector('`+row+` .steer.resume') !== null && document.querySelector('`+row+`').textContent.includes('paused')`)
		voucher, _ := strconv.ParseInt(id, 10, 64)
		if status, body := h.do("POST", "/api/vouchers/"+id+"/seckill", h.shopper(1), nil); status != 403 || errorCode(body) != "paused" {
			t.Fatalf("a seckill after the dashboard's pause: %d %v", status, body)
		}
		press("stock")
		b.waitJS(p, "the units are added", `document.getElementById('admin-result').textContent.includes('"stock"')`)
		press("resume")
		b.waitJS(p, "the row says on sale", `document.querySelector('`+row+` .steer.pause') !== null`)
		b.waitJS(p, "the record shows the three actions", `(() => { const t = document.getElementById('action-table').textContent;
			return t.includes('pause') && t.includes('stock') && t.includes('resume') && t.includes('dashboard'); })()`)
		if _, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["state"] != "on_sale" {
			t.Fatalf("the voucher after the dashboard's resume: %v", v)
		}

		// The consumers: paused (a seckill's order then waits in the
		// queue), capped, resumed; the record lists them.
		b.click(p, "#consumers-pause")
		b.waitJS(p, "the consumers say paused", `document.getElementById('consumers-state').dataset.paused === 'true'`)
		if status, body := h.do("POST", "/api/vouchers/"+id+"/seckill", h.shopper(2), nil); status != 200 {
			t.Fatalf("a seckill with the consumers paused: %d %v", status, body)
		}
		time.Sleep(500 * time.Millisecond)
		if rows, _ := h.rows(voucher); rows != 0 {
			t.Fatalf("%d rows with the consumers paused from the dashboard", rows)
		}
		b.must("clear the cap", p.MustElement("#consumers-rate").SelectAllText())
		b.input(p, "#consumers-rate", "25")
		b.click(p, "#consumers-cap")
		b.waitJS(p, "the cap is shown", `document.getElementById('consumers-state').textContent.includes('at most 25 orders a second')`)
		b.click(p, "#consumers-resume")
		b.waitJS(p, "the consumers say running", `document.getElementById('consumers-state').dataset.paused === 'false'`)
		if rows := h.waitForRows(voucher, 1, 10*time.Second); rows != 1 {
			t.Fatalf("%d rows after the dashboard's resume, want the queued order", rows)
		}
		b.waitJS(p, "the record shows the consumers' actions", `(() => { const t = document.getElementById('action-table').textContent;
			return t.includes('consumers_pause') && t.includes('consumers_rate') && t.includes('consumers_resume'); })()`)
		// The payments' reconciliation: counted, nothing amiss.
		b.waitJS(p, "the payments' report is shown", `document.getElementById('payments-summary').dataset.mismatches === '0' &&
			document.getElementById('payments-summary').textContent.includes('payments')`)
		b.screenshot(p, "dashboard-steering", 1280, 1600, false)
		b.clean()
	})
}

// TestABackendThatLosesOrdersSaysSoOnTheDashboard: pubsub keeps no message
// nobody listens to; the dashboard says so (as the start-up log does), and
// the default backend carries no such warning.
func TestABackendThatLosesOrdersSaysSoOnTheDashboard(t *testing.T) {
	for queue, want := range map[string]bool{"pubsub": true, "streamgroup": false} {
		h := startServer(t, "embedded", func(c *Config) { c.Queue = queue })
		status, body := h.do("GET", "/api/dashboard", h.cfg.AdminToken, nil)
		w, _ := body["warnings"].([]any)
		warned := len(w) == 1 && strings.Contains(w[0].(string), "SECKILL_QUEUE="+queue+" keeps no message")
		if status != 200 || warned != want || (!want && len(w) != 0) {
			t.Errorf("dashboard under %s: %d warnings %v, want the loss warned of: %v", queue, status, body["warnings"], want)
		}
	}
}

// TestAnOutsideBrokersRelayIsOnTheDashboardAndInMetrics: under nats the
// relay's figures move as orders pass (what it forwarded, the outbox
// behind it) on the dashboard and in /metrics; a Redis backend has no
// relay and shows none.
func TestAnOutsideBrokersRelayIsOnTheDashboardAndInMetrics(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) { c.Queue = "nats" })
	voucher := h.openVoucher(10)
	for u := int64(1); u <= 4; u++ {
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
	}
	h.waitForRows(voucher, 4, 10*time.Second)
	text := h.metricsText()
	if !strings.Contains(text, `seckill_relay_forwarded_total{queue="nats"} 4`) || !strings.Contains(text, `seckill_relay_outbox_depth{queue="nats"} 0`) {
		t.Fatalf("the relay's metrics do not show 4 orders forwarded and an empty outbox:\n%s", grepLines(text, "seckill_relay_"))
	}
	deadline := time.Now().Add(5 * time.Second)
	var relay map[string]any
	for time.Now().Before(deadline) {
		_, body := h.do("GET", "/api/dashboard", h.cfg.AdminToken, nil)
		relay, _ = body["relay"].(map[string]any)
		if relay != nil && relay["forwarded"] == float64(4) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if relay == nil || relay["forwarded"] != float64(4) || relay["failures"] != float64(0) || relay["outboxDepth"] != float64(0) {
		t.Fatalf("dashboard relay %v, want 4 forwarded, no failure, an empty outbox", relay)
	}
	plain := startServer(t, "embedded", nil)
	if _, body := plain.do("GET", "/api/dashboard", plain.cfg.AdminToken, nil); body["relay"] != nil {
		t.Fatalf("streamgroup's dashboard shows a relay: %v", body["relay"])
	}
	if strings.Contains(plain.metricsText(), "seckill_relay_") {
		t.Fatal("streamgroup's /metrics has relay series")
	}
}
