package lab

import (
	"crypto/rand"
	"encoding/hex"

	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/app/server"
)

// The comparison lab (`seckill-lab compare`, `make compare`): the same sale on
// every backend, measured on this machine, written to docs/results.md.

// labBackend is one column of the comparison: every registered backend,
// and each of its variants (the list's reliable mode).
type labBackend struct {
	name   string
	mutate func(*server.Config)
}

func labBackends() []labBackend {
	var out []labBackend
	for _, b := range server.Backends() {
		out = append(out, labBackend{b.Name, func(c *server.Config) { *c = c.ForQueue(b.Name) }})
		for _, v := range b.Variants {
			out = append(out, labBackend{v.Name, func(c *server.Config) { *c = c.ForQueue(b.Name); v.Configure(c) }})
		}
	}
	return out
}

type labOptions struct {
	duration    time.Duration
	conns       int
	drainOrders int64
	out         string
	only        string
	// The sell-out sale: stock and shoppers (every tenth tries twice).
	stock, shoppers int64
	noFaults        bool
	// redisFaultsOnly skips the consumer and MySQL faults.
	redisFaultsOnly bool
	// vouchers the throughput run and the drain spread over.
	vouchers int
}

// labResult is what the lab measured for one backend.
type labResult struct {
	Backend string
	Load    loadResult
	// Reservation to row, over the throughput run's orders.
	RowP50, RowP99 time.Duration
	// Drain: orders persisted per second by consumers started on a backlog.
	DrainRate float64
	// The sell-out sale.
	Stock, Accepted, Oversold, Duplicates, Unpersisted int64
	// Faults, in the order of labFaults, and the Redis faults mid-sale, in
	// the order of redisFaults.
	Faults      []faultResult
	RedisFaults []saleFaultResult
	// History is the history check (lab_history.go).
	History historyResult
	Err     string
}

// RunCompare is `seckill-lab compare`: the same sale on every backend,
// measured, written to docs/results.md. It returns the exit status.
func RunCompare(args []string) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	var o labOptions
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each throughput run")
	fs.IntVar(&o.conns, "conns", 50, "keep-alive connections of the load generator")
	fs.Int64Var(&o.drainOrders, "drain-orders", 8000, "backlog the drain rate is measured on")
	fs.Int64Var(&o.stock, "sellout-stock", 1000, "stock of the sell-out sale")
	fs.Int64Var(&o.shoppers, "sellout-shoppers", 5000, "shoppers of the sell-out sale (every tenth tries twice)")
	fs.BoolVar(&o.noFaults, "no-faults", false, "skip the fault injection")
	fs.BoolVar(&o.redisFaultsOnly, "redis-faults-only", false, "of the faults, inject only the Redis faults mid-sale")
	fs.StringVar(&o.out, "out", defaultOut, "where to write the results (charts go beside it); an untracked folder unless -write-docs")
	writeDocs := fs.Bool("write-docs", false, "write the committed docs/results.md (real servers only)")
	fs.StringVar(&o.only, "backends", "", "comma-separated backends to run (default: all)")
	fs.IntVar(&o.vouchers, "vouchers", 1, "vouchers the throughput run and the drain spread their orders over (on a cluster, over the shards)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.vouchers < 1 {
		fmt.Fprintln(os.Stderr, "compare: -vouchers must be at least 1")
		return 2
	}
	base, err := server.LoadConfig(labLookup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	embedded := base.EmbeddedRedis() || base.EmbeddedSQL()
	if *writeDocs {
		if embedded {
			fmt.Fprintln(os.Stderr, "compare: -write-docs needs SECKILL_REDIS_URL and SECKILL_MYSQL_DSN: docs/results.md holds figures of the real servers, and the stand-ins would measure something else")
			return 2
		}
		o.out = docsOut
	}
	mode := "real Redis and MySQL"
	if embedded {
		mode = "embedded stand-ins (miniredis, in-memory SQLite)"
		progressf("%s", embeddedBanner)
	}
	progressf("compare: %s, %v per throughput run, %d connections", mode, o.duration, o.conns)

	var results []labResult
	for _, b := range labBackends() {
		if o.only != "" && !strings.Contains(","+o.only+",", ","+b.name+",") {
			continue
		}
		if b.name == "kafka" && base.Value("SECKILL_KAFKA_BROKERS") == "" {
			stop, err := startLabKafka(&base)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer stop()
		}
		if b.name == "kafka" && labKafka != nil {
			b.name = kfakeColumn
		}
		r := runLabBackend(base, b, o, progressf)
		results = append(results, r)
	}
	if err := writeResults(o, base, results, "seckill-lab "+strings.Join(os.Args[1:], " ")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	progressf("compare: wrote %s", o.out)
	fmt.Print(summary(results))
	return 0
}

const (
	// defaultOut is untracked (.gitignore): a run does not overwrite the
	// committed results unless asked to.
	defaultOut = "compare-results/results.md"
	docsOut    = "docs/results.md"
)

// embeddedBanner heads a run on the stand-ins, on the terminal and in its
// results file: there the lab measures an in-process Redis and SQLite, and
// the order of the backends can come out the other way round.
const embeddedBanner = "EMBEDDED STAND-INS: this run measures miniredis and SQLite inside this process, not the backends on real servers " +
	"(there `sync` can beat every queue, the opposite of a real run). For figures of the backends set SECKILL_REDIS_URL and SECKILL_MYSQL_DSN; docs/results.md holds such a run."

// labLookup reads the environment, filling in lab secrets when missing so
// the lab runs against real servers without extra setup.
func labLookup(name string) (string, bool) {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v, true
	}
	switch name {
	case "SECKILL_JWT_SECRET", "SECKILL_ADMIN_TOKEN":
		key := make([]byte, 32) // what real servers take: 32 random bytes
		rand.Read(key)
		return hex.EncodeToString(key), true
	case "SECKILL_SECKILL_RATE", "SECKILL_CODE_RATE", "SECKILL_MAX_CONNS_PER_IP":
		return "0", true // the load generator is one client hammering on purpose
	case "SECKILL_DEMO_SALE":
		return "0", true // the lab opens its own vouchers
	}
	return "", false
}

// progressf prints a line of a long run's progress on stderr, so stdout
// keeps only the summary.
func progressf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

func runLabBackend(base server.Config, b labBackend, o labOptions, progress func(string, ...any)) (res labResult) {
	res.Backend = b.name
	defer func() {
		if res.Err != "" {
			progress("[%s] failed: %s", b.name, res.Err)
		}
	}()
	cfg := base
	b.mutate(&cfg)
	cfg.Addr = "127.0.0.1:0"
	cfg.KeyPrefix = "lab" + rand.Text()[:4] + ":"
	usedPrefix(cfg.KeyPrefix)
	defer dropKeys(cfg.RedisURL, cfg.KeyPrefix)
	defer dropLabStreams(cfg)

	// 1. Throughput and latency with consumers running, on a stock that
	// does not sell out, every request a new shopper.
	h, err := startLab(cfg)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	vouchers, err := h.vouchers(o.vouchers, 1_000_000_000)
	if err != nil {
		h.stop()
		res.Err = err.Error()
		return res
	}
	defer dropVouchers(cfg.MySQLDSN, vouchers...)
	progress("[%s] throughput: %v of seckill requests on %d voucher(s) over %d connections…", b.name, o.duration, len(vouchers), o.conns)
	res.Load = runLoad(context.Background(), o.conns, o.duration, 0, h.buyRequest(vouchers, 1, tokensFor(o.duration)))
	ok := res.Load.Status[http.StatusOK]
	progress("[%s]   %.0f req/s, p50 %v, p99 %v, %d accepted, statuses %v",
		b.name, res.Load.perSecond(), res.Load.percentile(.5), res.Load.percentile(.99), ok, res.Load.Status)
	if n := h.waitRows(vouchers, ok, 120*time.Second); n != ok {
		progress("[%s]   only %d of %d accepted orders persisted after 120s", b.name, n, ok)
	}
	res.RowP50, res.RowP99 = h.rowLatency(vouchers...)
	progress("[%s]   reservation to row (p50, p99): %s", b.name, rowLatencyCell(res.RowP50, res.RowP99, ", "))

	// 2. The sell-out sale: stock 1,000, 5,000 shoppers, every tenth twice.
	res.Stock = o.stock
	sellOut, err := h.voucher(res.Stock)
	if err == nil {
		defer dropVouchers(cfg.MySQLDSN, sellOut)
		res.Accepted, res.Oversold, res.Duplicates, res.Unpersisted, err = h.sellOut(sellOut, res.Stock, o.shoppers, o.conns)
	}
	if err != nil {
		res.Err = err.Error()
	}
	progress("[%s] sell-out: %d accepted of %d, oversold %d, duplicates %d, accepted but not persisted %d",
		b.name, res.Accepted, res.Stock, res.Oversold, res.Duplicates, res.Unpersisted)
	h.stop()

	// 3. Drain: a backlog built with no consumer, then consumers started.
	// Pub/Sub keeps no backlog: with no consumer there is no subscriber.
	if cfg.Queue != "sync" && cfg.Queue != "pubsub" {
		dc := cfg
		dc.Consumers, dc.KeyPrefix = 0, "lab"+rand.Text()[:4]+":"
		res.DrainRate, err = drainRate(dc, max(cfg.Consumers, 1), o)
		dropKeys(dc.RedisURL, dc.KeyPrefix)
		if err != nil {
			res.Err = err.Error()
		}
		progress("[%s] drain: %.0f orders/s", b.name, res.DrainRate)
	}

	// 4. Faults, against separate server processes.
	if !o.noFaults {
		res.Faults, res.RedisFaults, res.History = runFaults(cfg, o.conns, o.redisFaultsOnly, progress)
	}
	return res
}

// labServer is an in-process server and a client for it.
type labServer struct {
	cfg    server.Config
	srv    *server.Server
	base   string
	tokens *server.Tokens
	client *http.Client
	cancel context.CancelFunc
	done   chan error
}

func startLab(cfg server.Config) (*labServer, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		cancel()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		cancel()
		srv.Close()
		return nil, err
	}
	h := &labServer{cfg: cfg, srv: srv, base: "http://" + ln.Addr().String(), tokens: server.NewTokens(cfg.JWTSecret, 0),
		client: &http.Client{Timeout: 10 * time.Second}, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- srv.Serve(ctx, ln) }()
	return h, nil
}

func (h *labServer) stop() {
	h.cancel()
	<-h.done
	h.srv.Close()
}

// vouchers creates n vouchers of the stock, on sale now.
func (h *labServer) vouchers(n int, stock int64) ([]int64, error) {
	out := make([]int64, 0, n)
	for range n {
		v, err := h.voucher(stock)
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

// voucher creates a voucher as an operator does, through the admin API.
func (h *labServer) voucher(stock int64) (int64, error) {
	return createVoucher(h.base, h.cfg.AdminToken, stock)
}

// buyRequest makes request n a seckill by shopper firstUser+n; see
// buyRequests for expected.
func (h *labServer) buyRequest(vouchers []int64, firstUser, expected int64) func(int64) loadRequest {
	return buyRequests(h.base, h.tokens, vouchers, firstUser, expected)
}

// tokensFor is how many tokens to sign ahead of a run of duration d: more
// than this machine serves in that time.
func tokensFor(d time.Duration) int64 { return int64(d.Seconds() * 40_000) }

func (h *labServer) rows(vouchers ...int64) int64 {
	n, err := h.srv.TestHooks().Database().NewSelect().Table("tb_voucher_order").Where("voucher_id IN (?)", bun.List(vouchers)).Count(context.Background())
	if err != nil {
		return -1
	}
	return int64(n)
}

// waitRows polls until the voucher has want rows, or within passes, and
// returns the last count.
func (h *labServer) waitRows(vouchers []int64, want int64, within time.Duration) int64 {
	return waitFor(func() int64 { return h.rows(vouchers...) }, want, within)
}

// waitFor polls count until it reaches want or within passes, and returns
// the last count.
func waitFor(count func() int64, want int64, within time.Duration) int64 {
	deadline := time.Now().Add(within)
	for {
		n := count()
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rowLatency is the time from reservation (the order's create_time) to its
// row (update_time, written by the consumer's batch), p50 and p99.
func (h *labServer) rowLatency(vouchers ...int64) (time.Duration, time.Duration) {
	var rows []struct {
		CreateTime time.Time `bun:"create_time"`
		UpdateTime time.Time `bun:"update_time"`
	}
	if err := h.srv.TestHooks().Database().NewSelect().Table("tb_voucher_order").Column("create_time", "update_time").
		Where("voucher_id IN (?)", bun.List(vouchers)).Scan(context.Background(), &rows); err != nil || len(rows) == 0 {
		return 0, 0
	}
	d := loadResult{}
	for _, r := range rows {
		d.Latencies = append(d.Latencies, max(r.UpdateTime.Sub(r.CreateTime), 0))
	}
	slices.Sort(d.Latencies) // percentile reads a sorted slice
	return d.percentile(.5), d.percentile(.99)
}

func idString(v int64) string { return strconv.FormatInt(v, 10) }
