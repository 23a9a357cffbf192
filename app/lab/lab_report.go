package lab

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/app/server"
	"github.com/seckill-lab/seckill/app/svgchart"
)

// writeResults writes the results table, the machine and versions, and two
// SVG bar charts beside it.
func writeResults(o labOptions, cfg server.Config, results []labResult, command string) error {
	dir := filepath.Dir(o.out)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeCharts(dir, results); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Measured results\n\n")
	if cfg.EmbeddedRedis() || cfg.EmbeddedSQL() {
		fmt.Fprintf(&b, "> **%s**\n\n", embeddedBanner)
	}
	fmt.Fprintf(&b, "Written by `make compare` (`%s`) on %s.\n\n", strings.TrimSpace(command), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "- Machine: %s\n", machine())
	fmt.Fprintf(&b, "- Versions: %s\n", versions(cfg))
	if bv := brokerVersions(cfg, results); bv != "" {
		fmt.Fprintf(&b, "- Outside brokers: %s\n", bv)
	}
	fmt.Fprintf(&b, "- Load: %v per throughput run, %d keep-alive connections from a load generator in the same process as the server; every request a new shopper, on %s whose stock does not sell out. Drain: a backlog of %d orders built with no consumer running, then the consumers started and timed.\n\n", o.duration, o.conns, stockOf(o.vouchers), o.drainOrders)
	writeResultsTable(&b, results)
	b.WriteString("\n![throughput](results-throughput.svg)\n\n![drain](results-drain.svg)\n")
	if note, none := faultsNotRun(results); none {
		// One line, not the method of each fault and a table of "not run".
		fmt.Fprintf(&b, "\nFaults were not injected in this run: %s.\n", strings.TrimPrefix(note, "not run: "))
	} else {
		writeFaults(&b, results)
		writeRedisFaults(&b, results)
		writeHistory(&b, results)
	}
	// What an author wrote below the marker in the file being replaced (a
	// section on a run with other flags, say) is kept.
	if old, err := os.ReadFile(o.out); err == nil {
		if i := strings.Index(string(old), keptMarker); i >= 0 {
			b.WriteString("\n" + string(old[i:]))
		}
	}
	return os.WriteFile(o.out, []byte(b.String()), 0o644)
}

// writeCharts writes the throughput and drain bar charts into dir.
func writeCharts(dir string, results []labResult) error {
	tput := make([]svgchart.Bar, 0, len(results))
	drain := make([]svgchart.Bar, 0, len(results))
	for _, r := range results {
		tput = append(tput, svgchart.Bar{Label: r.Backend, Value: r.Load.perSecond()})
		if r.DrainRate > 0 {
			drain = append(drain, svgchart.Bar{Label: r.Backend, Value: r.DrainRate})
		}
	}
	charts := []struct {
		file, title string
		bars        []svgchart.Bar
	}{
		{"results-throughput.svg", "Seckill requests per second over HTTP", tput},
		{"results-drain.svg", "Orders persisted per second from a backlog", drain},
	}
	for _, c := range charts {
		if len(c.bars) == 0 {
			continue
		}
		svg, err := svgchart.Bars(c.title, c.bars, 800, 60+34*len(c.bars))
		if err != nil {
			return fmt.Errorf("chart %s: %w", c.file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), svg, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeResultsTable writes the table of every backend's figures, and
// below it why each that failed did.
func writeResultsTable(b *strings.Builder, results []labResult) {
	b.WriteString("| backend | seckill req/s | p50 | p99 | reservation → row p50 / p99 | drain orders/s | sell-out: accepted of stock | oversold | duplicate orders | accepted, not persisted |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.Load.Duration == 0 && r.Err != "" {
			fmt.Fprintf(b, "| %s | did not run (below) | | | | | | | | |\n", r.Backend)
			continue
		}
		drainCell := "— (no queue)"
		if r.Backend == "pubsub" {
			drainCell = "— (keeps no backlog)"
		}
		if r.DrainRate > 0 {
			drainCell = fmt.Sprintf("%.0f", r.DrainRate)
		}
		fmt.Fprintf(b, "| %s | %.0f | %v | %v | %s | %s | %d of %d | %d | %d | %d |\n",
			r.Backend, r.Load.perSecond(), round(r.Load.percentile(.5)), round(r.Load.percentile(.99)),
			rowLatencyCell(r.RowP50, r.RowP99, " / "), drainCell, r.Accepted, r.Stock, r.Oversold, r.Duplicates, r.Unpersisted)
	}
	for _, r := range results {
		if r.Err != "" {
			fmt.Fprintf(b, "\n**%s failed:** %s\n", r.Backend, r.Err)
		}
	}
}

// faultsNotRun reports whether no fault ran on any backend, and the first
// reason given.
func faultsNotRun(results []labResult) (note string, none bool) {
	for _, r := range results {
		for _, f := range r.Faults {
			if f.Ran {
				return "", false
			}
			note = cmp.Or(note, f.Note)
		}
		for _, f := range r.RedisFaults {
			if f.Ran {
				return "", false
			}
			note = cmp.Or(note, f.Note)
		}
		if r.History.Ran {
			return "", false
		}
		note = cmp.Or(note, r.History.Note)
	}
	return cmp.Or(note, "-no-faults"), true
}

// summary is a short plain-text table a student can paste: the same
// figures as the file, and the same dashes where a figure does not apply.
func summary(results []labResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %10s %9s %9s %12s %9s %14s\n", "backend", "req/s", "p50", "p99", "drain/s", "oversold", "not persisted")
	for _, r := range results {
		if r.Load.Duration == 0 && r.Err != "" {
			fmt.Fprintf(&b, "%-14s did not run: %s\n", r.Backend, r.Err)
			continue
		}
		drain := "—"
		if r.DrainRate > 0 {
			drain = fmt.Sprintf("%.0f", r.DrainRate)
		}
		fmt.Fprintf(&b, "%-14s %10.0f %9v %9v %12s %9d %14d\n", r.Backend, r.Load.perSecond(),
			round(r.Load.percentile(.5)), round(r.Load.percentile(.99)), drain, r.Oversold, r.Unpersisted)
	}
	b.WriteString("(sell-out sale: oversold, and accepted but not persisted; drain — : no queue, or one that keeps no backlog)\n")
	if note, none := faultsNotRun(results); none {
		fmt.Fprintf(&b, "faults: not injected (%s), so nothing here says what a crash loses\n", strings.TrimPrefix(note, "not run: "))
	} else {
		b.WriteString("faults: see the results file\n")
	}
	return b.String()
}

func round(d time.Duration) time.Duration {
	switch {
	case d > 10*time.Millisecond:
		return d.Round(time.Millisecond)
	case d > 10*time.Microsecond:
		return d.Round(10 * time.Microsecond)
	}
	return d
}

func machine() string {
	model := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, model, _ = strings.Cut(l, ": ")
				break
			}
		}
	}
	return fmt.Sprintf("%s/%s, %d cores (%s)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), strings.TrimSpace(model))
}

// keptMarker starts the part of a results file that `make compare` keeps
// when it rewrites the file.
const keptMarker = "<!-- kept by make compare: written by hand below -->"

func stockOf(vouchers int) string {
	if vouchers == 1 {
		return "one voucher"
	}
	return fmt.Sprintf("%d vouchers (requests to each in turn, and the drain's backlog too)", vouchers)
}

func versions(cfg server.Config) string {
	parts := []string{runtime.Version()}
	if cfg.EmbeddedRedis() {
		parts = append(parts, "Redis: embedded miniredis")
	} else if c, err := server.OpenRedis(context.Background(), cfg.RedisURL); err == nil {
		if info, err := c.Info(context.Background(), "server").Result(); err == nil {
			for _, l := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
					parts = append(parts, "Redis "+v)
				}
			}
		}
		if cc, ok := c.(*redis.ClusterClient); ok {
			var masters atomic.Int64
			cc.ForEachMaster(context.Background(), func(context.Context, *redis.Client) error { masters.Add(1); return nil })
			parts[len(parts)-1] += fmt.Sprintf(" (a Redis Cluster of %d masters, on this machine)", masters.Load())
		}
		c.Close()
	}
	if cfg.EmbeddedSQL() {
		parts = append(parts, "SQL: embedded SQLite (modernc.org/sqlite)")
	} else if s, err := openStoreForVersion(cfg.MySQLDSN); err == nil {
		parts = append(parts, "MySQL/MariaDB "+s)
	}
	return strings.Join(parts, ", ")
}

func openStoreForVersion(dsn string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := mysqlstore.OpenMySQL(ctx, dsn, 0)
	if err != nil {
		return "", err
	}
	defer st.Close()
	var v string
	err = st.DB().QueryRowContext(ctx, "SELECT VERSION()").Scan(&v)
	return v, err
}

// writeFaults adds the fault table: one row per backend, one column per
// fault, each cell "lost / redelivered" with the time to resume.
func writeFaults(b *strings.Builder, results []labResult) {
	ran := false
	for _, r := range results {
		ran = ran || len(r.Faults) > 0
	}
	if !ran {
		b.WriteString("\nFaults were not injected in this run (`-no-faults`).\n")
		return
	}
	fmt.Fprintf(b, "\n## Faults\n\nEach fault runs against separate server processes (this binary): %d orders are accepted by a process with one consumer persisting 20 orders per transaction, reaching MySQL through a proxy that delays each request by %v (so the drain is slower than the buying), and the fault strikes once a quarter of them are in MySQL. A cell reads *lost* (accepted, never persisted) / *redelivered* (delivered again, found already persisted, absorbed by the store), where the fault struck, then how long until the next order was persisted after the fault ended. Stock is checked too: the database's stock fell by exactly the number of rows in every run unless a cell says otherwise.\n\n", faultBacklog, faultDBDelay)
	b.WriteString("| backend |")
	for _, f := range labFaults {
		b.WriteString(" " + f + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(labFaults)) + "\n")
	for _, r := range results {
		fmt.Fprintf(b, "| %s |", r.Backend)
		for _, f := range r.Faults {
			if !f.Ran {
				fmt.Fprintf(b, " %s |", f.Note)
				continue
			}
			resumed := "no order came back"
			if f.Resumed > 0 {
				resumed = fmt.Sprintf("resumed after %v", round(f.Resumed))
			}
			cell := fmt.Sprintf("**%d** lost / %d redelivered (struck at %d of %d persisted); %s",
				f.Lost, f.Redelivered, f.StruckAt, f.Accepted, resumed)
			if f.StockOff != 0 {
				cell += fmt.Sprintf("; stock off by %d", f.StockOff)
			}
			if f.Note != "" {
				cell += "; " + f.Note
			}
			fmt.Fprintf(b, " %s |", cell)
		}
		b.WriteString("\n")
	}
}

// writeRedisFaults adds the table of Redis faults mid-sale: one row per
// backend, one column per fault.
func writeRedisFaults(b *strings.Builder, results []labResult) {
	ran := false
	for _, r := range results {
		ran = ran || len(r.RedisFaults) > 0
	}
	if !ran {
		return
	}
	fmt.Fprintf(b, "\n## Redis faults mid-sale\n\n"+
		"A sale of %d items to %d shoppers (a quarter of them, past the first thousand, try again about two-thirds of a second later), paced at %d requests/s from %d connections, against a server process (this binary) on a Redis of the lab's own; the consumer reaches MySQL through the same delaying proxy as above, so orders wait in the queue when Redis goes. "+
		"*Restarted empty*: SIGKILL once a quarter of the stock is accepted, started again with nothing. *From an older snapshot*: SAVE at an eighth, SIGKILL at a quarter, started from that snapshot. "+
		"*Failover*: a primary, two replicas and three sentinels, the server following them through `SECKILL_REDIS_URL`'s `master_name`; at a fifth of the stock the replication stream is held back (a proxy between the primary and its replicas stops passing it on), a second later the primary is SIGKILLed and the sentinels promote a replica that never had the last writes. "+
		"A cell reads *lost* (answered 200, never in MySQL) / *twice* (shoppers answered 200 with two different orders) / *oversold* (rows beyond the stock), then the orders answered 200, and the time from the fault to the answer of the first request sent after it that was accepted. The WAIT mode's cell also counts the answers 503 `unconfirmed`, and how many of those orders MySQL holds anyway.\n\n",
		saleFaultStock, saleFaultShoppers, saleFaultRate, saleFaultConns)
	writeSaleFaultTable(b, results, 0, firstOutageFault, false)
	fmt.Fprintf(b, "\n## Outages and a full Redis mid-sale\n\n"+
		"The same sale. *Unreachable*: once a quarter of the stock is accepted, a proxy between the server and Redis (or MySQL) swallows every byte for %v and keeps the connections open — a partition, not a restart — then resets them. "+
		"*Redis full*: a Redis of the lab's own with that `maxmemory-policy` (the server started with `SECKILL_REDIS_ALLOW_EVICTION=1`; without it the server refuses such a Redis), whose `maxmemory` is set at a quarter of the stock to 256 KiB above what it then uses, so the rest of the sale writes past it; every key in it is the sale's. "+
		"*Squeezed*: the same cap, lifted after %v. "+
		"A cell reads *lost* / *twice* / *oversold* as above, the orders answered 200, the answers 503 (`unavailable`, `busy`), the requests that had no answer within the shoppers' 10 s, the slowest answer, the longest time after the fault with no order accepted (up to the last one), and the keys Redis evicted.\n\n", outageFor, outageFor)
	writeSaleFaultTable(b, results, firstOutageFault, len(redisFaults), true)
}

// writeSaleFaultTable writes columns from…to of the sale faults.
func writeSaleFaultTable(b *strings.Builder, results []labResult, from, to int, outages bool) {
	b.WriteString("| backend |")
	for _, f := range redisFaults[from:to] {
		b.WriteString(" " + f + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", to-from) + "\n")
	for _, r := range results {
		if len(r.RedisFaults) < to {
			continue
		}
		fmt.Fprintf(b, "| %s |", r.Backend)
		for _, f := range r.RedisFaults[from:to] {
			if !f.Ran {
				fmt.Fprintf(b, " %s |", f.Note)
				continue
			}
			again := "no order accepted after it"
			if f.Correct > 0 {
				again = fmt.Sprintf("accepting again after %v", round(f.Correct))
			}
			cell := fmt.Sprintf("**%d** / %d / %d; %d accepted of %d; %s", f.Lost, f.Twice, f.Oversold, f.Accepted, f.Stock, again)
			if f.Unconfirmed > 0 {
				cell += fmt.Sprintf("; %d unconfirmed (%d of them persisted)", f.Unconfirmed, f.UnconfirmedKept)
			}
			if outages {
				cell += fmt.Sprintf("; %d × 503, %d unanswered, slowest %v, stopped %v", f.Unavailable, f.Unanswered, round(f.Slowest), round(f.Stopped))
				if f.Evicted > 0 {
					cell += fmt.Sprintf("; %d keys evicted", f.Evicted)
				}
			}
			fmt.Fprintf(b, " %s |", cell)
		}
		b.WriteString("\n")
	}
}

// writeHistory adds the history check's table: one row per backend.
func writeHistory(b *strings.Builder, results []labResult) {
	ran := false
	for _, r := range results {
		ran = ran || r.History.Ran
	}
	if !ran {
		return
	}
	fmt.Fprintf(b, "\n## The history check\n\n"+
		"The suite's `TestSaleHistoriesAreLinearizable`, per backend (`app/internal/history`): two server processes (this binary) on one MySQL and a Redis of the lab's own that fsyncs every write (`appendfsync always`), %d vouchers of %d units, %d shoppers of each, %d operations from 12 clients — half seckills, the rest reads of the stock and of the shopper's order, repeats included — an operator's reconcile of a random voucher on a random instance every 50 ms, and Redis SIGKILLed and restarted at 5%% and 33%% of the operations (nothing lost on disk, but a new `run_id` each time, so every voucher is verified and rebuilt). "+
		"*Linearizable*: each voucher's history against a sequential model of a sale (Porcupine; a request with no answer may or may not have reserved). *Settled*: every order an answer named is in MySQL, no shopper holds two, the stock column is the stock less the rows, every row was answered to someone or belongs to a shopper whose request had no answer, and the audit finds no difference (within 30 s).\n\n",
		historyVouchers, historyStock, historyUsers, historyOps)
	b.WriteString("| backend | linearizable | settled | answers |\n|---|---|---|---|\n")
	for _, r := range results {
		h := r.History
		if !h.Ran {
			fmt.Fprintf(b, "| %s | %s | | |\n", r.Backend, h.Note)
			continue
		}
		lin, settled := "yes", "yes"
		switch {
		case !h.Linearizable:
			lin, settled = "**no**: "+h.Failure, "—"
		case !h.Settled:
			settled = "**no**: " + h.Failure
		}
		keys := make([]string, 0, len(h.Outcomes))
		for k := range h.Outcomes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var answers []string
		for _, k := range keys {
			answers = append(answers, fmt.Sprintf("%s %d", k, h.Outcomes[k]))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", r.Backend, lin, settled, strings.Join(answers, ", "))
	}
}

// rowLatencyCell shows how long a reservation took to become a row, p50
// and p99, or a dash where it was not measured: SQLite (the stand-in)
// stamps a row in whole seconds, so its rows all read 0s.
func rowLatencyCell(p50, p99 time.Duration, sep string) string {
	if p99 == 0 {
		return "— (SQLite stamps a row in whole seconds)"
	}
	return fmt.Sprintf("%v%s%v", round(p50), sep, round(p99))
}
