package server

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

// The rules and the board outside tools read, under deploy/.
const (
	alertRulesDir = "../../deploy/prometheus"
	dashboardFile = "../../deploy/grafana/dashboards/seckill.json"
)

// exportedSeries is every series a server can export, with the labels each
// can carry: what a server's registry describes (the Go and process
// collectors included) and the collectors of the queue and the relay, which
// a server registers on the backends that have them. Prometheus adds
// instance and job to each; a histogram's parts carry le, a summary's
// quantile.
func exportedSeries(t *testing.T) map[string][]string {
	t.Helper()
	m := newMetrics("streamgroup")
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// parts are the series of a histogram's or summary's, by its name.
	parts := map[string][]string{}
	for _, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			parts[f.GetName()] = []string{"_bucket", "_sum", "_count"}
		case dto.MetricType_SUMMARY:
			parts[f.GetName()] = []string{"", "_sum", "_count"}
		}
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		m.registry.Describe(descs)
		newQueueCollector("streamgroup", nil, nil).Describe(descs)
		newRelayCollector("nats", nil, nil).Describe(descs)
		newDeadLetterCollector("streamgroup", nil, nil).Describe(descs)
		newClockCollector("streamgroup", nil).Describe(descs)
		newPausedCollector("streamgroup", nil).Describe(descs)
		newUnreconciledCollector("streamgroup", nil, 0).Describe(descs)
		close(descs)
	}()
	shape := regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*constLabels: \{(.*)\}, variableLabels: \{([^}]*)\}\}$`)
	series := map[string][]string{}
	for desc := range descs {
		d := shape.FindStringSubmatch(desc.String())
		if d == nil {
			t.Fatalf("cannot read the description %s", desc)
		}
		labels := []string{"instance", "job"}
		for _, pair := range strings.Split(d[2], ",") {
			if name, _, ok := strings.Cut(pair, "="); ok {
				labels = append(labels, name)
			}
		}
		labels = append(labels, strings.Split(d[3], ",")...)
		series[d[1]] = labels
		for _, suffix := range parts[d[1]] {
			series[d[1]+suffix] = append(slices.Clip(labels), "le", "quantile")
		}
	}
	series["up"] = []string{"instance", "job"}
	if len(series) < 30 {
		t.Fatalf("only %d series described", len(series))
	}
	return series
}

var (
	seriesName = regexp.MustCompile(`\b(?:seckill|go|process)_[a-z0-9_]+\b|\bup\b`)
	// grouped are the labels of by (...) and without (...); matched those
	// of {label="value"}.
	grouped = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matched = regexp.MustCompile(`\{([^}]*)\}`)
	matcher = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// checkQuery: each series expr names is one the server exports, and each
// label it groups or matches by is one of theirs.
func checkQuery(t *testing.T, series map[string][]string, where, expr string) {
	t.Helper()
	names := seriesName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: %q names no series of the server's", where, expr)
	}
	var labels []string
	for _, name := range names {
		l, ok := series[name]
		if !ok {
			t.Errorf("%s: %q reads %s, which the server does not export", where, expr, name)
		}
		labels = append(labels, l...)
	}
	var used []string
	for _, g := range grouped.FindAllStringSubmatch(expr, -1) {
		used = append(used, strings.Split(g[1], ",")...)
	}
	for _, m := range matched.FindAllStringSubmatch(expr, -1) {
		for _, l := range matcher.FindAllStringSubmatch(m[1], -1) {
			used = append(used, l[1])
		}
	}
	for _, l := range used {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) {
			t.Errorf("%s: %q uses the label %s, which none of %v carries", where, expr, l, names)
		}
	}
}

// TestTheAlertRulesFollowTheMetrics: deploy/prometheus/alerts.yml reads
// only series this server exports, by labels they carry (a renamed metric
// would silence its alert for ever), every alert has its runbook entry in
// docs/production.md, and promtool checks the rules, runs their unit tests
// and checks the compose file's Prometheus configuration (CI installs it;
// elsewhere that part skips without it).
func TestTheAlertRulesFollowTheMetrics(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join(alertRulesDir, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	series := exportedSeries(t)
	exprs := regexp.MustCompile(`(?m)^\s+expr: (.+)$`).FindAllStringSubmatch(string(rules), -1)
	if len(exprs) < 10 {
		t.Fatalf("only %d alert expressions found", len(exprs))
	}
	for _, e := range exprs {
		checkQuery(t, series, "alerts.yml", e[1])
	}
	guide, err := os.ReadFile("../../docs/production.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
		if !strings.Contains(string(guide), "### "+m[1]) {
			t.Errorf("alert %s has no runbook entry (### %s) in docs/production.md", m[1], m[1])
		}
	}
	promtool(t, alertRulesDir, []string{"check", "rules", "alerts.yml"}, []string{"test", "rules", "alerts_test.yml"},
		[]string{"check", "config", "prometheus.yml"})
}

// promtool runs each of runs in dir, where CI has installed it.
func promtool(t *testing.T, dir string, runs ...[]string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if redistopology.InCI() {
			t.Fatal("promtool is not installed: .ci/run installs Debian's prometheus package for it")
		}
		t.Skip("promtool is not installed (apt-get install prometheus): not checked here")
	}
	for _, args := range runs {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// grafanaBoard is what the test reads of a Grafana board.
type grafanaBoard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []boardVariable `json:"list"`
	} `json:"templating"`
}

// boardVariable is one of a board's template variables.
type boardVariable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

// histogramOf is the histogram a _bucket, _sum or _count series is part
// of; any other name as it is.
func histogramOf(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

// TestTheDashboardShowsWhatTheServerExports: every query of the Grafana
// board reads series the server exports, by labels they carry; each panel
// reads the board's Prometheus variable; every series of the server's own
// (seckill_*) is on the board, so a new one is not left off; and promtool
// parses each query (as a recording rule). No Grafana runs here: this is
// all that checks the board.
func TestTheDashboardShowsWhatTheServerExports(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var board grafanaBoard
	if err := json.Unmarshal(raw, &board); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(board.Templating.List, func(v boardVariable) bool {
		return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}) {
		t.Fatalf("the board has no Prometheus datasource variable: %+v", board.Templating.List)
	}
	series := exportedSeries(t)
	shown := map[string]bool{}
	queries := 0
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for _, p := range board.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %q and %d queries; want ${datasource} and a query", p.Title, p.Datasource.UID, len(p.Targets))
		}
		for _, q := range p.Targets {
			checkQuery(t, series, "panel "+p.Title, q.Expr)
			for _, name := range seriesName.FindAllString(q.Expr, -1) {
				shown[histogramOf(name)] = true
			}
			queries++
			fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %q\n", queries, q.Expr)
		}
	}
	for name := range series {
		if strings.HasPrefix(name, "seckill_") && !shown[histogramOf(name)] {
			t.Errorf("the server exports %s; no panel shows it", name)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, dir, []string{"check", "rules", "dashboard.yml"})
}
