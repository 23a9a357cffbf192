package lab

import (
	crand "crypto/rand"

	"cmp"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/app/server"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// `seckill-lab bench` (`make bench`): the load run of the benchmarks. Each
// figure is a ratio measured in the same run, against a baseline on the
// same machine, so the noise of a shared 2-core machine cancels out as far
// as it can.

type benchTarget struct {
	name     string
	ratio    float64
	target   float64 // 0: reported only
	detail   string
	measured bool
}

// benchRun is one measured load run.
type benchRun struct {
	rate float64
	p50  time.Duration
	cpu  cpuShare
	rss  int64 // peak RSS of the server process
}

// bench holds what every load run of `seckill-lab bench` shares.
type bench struct {
	cfg      server.Config
	duration time.Duration
	conns    int
	rdb      *redis.Client // for Redis's own CPU time
}

// profiles are where to write the server's profiles of a run ("": none).
type profiles struct{ cpu, mem string }

// load sends seckill requests by new shoppers to a started server for the
// bench's duration, and meters the CPU each side spent.
func (b *bench) load(p *labProcess, voucher int64, prof profiles, pprofAddr string) (benchRun, error) {
	requests := buyRequests(p.base, server.NewTokens(b.cfg.JWTSecret, 0), []int64{voucher}, 1, tokensFor(b.duration))
	profiled := make(chan error, 1)
	if prof.cpu != "" {
		// The profile skips the first and last second of the run:
		// connections opening and closing are not the steady state.
		go func() {
			time.Sleep(time.Second)
			d := max(b.duration-2*time.Second, time.Second)
			profiled <- fetchProfile(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, int(d.Seconds())), prof.cpu)
		}()
	} else {
		profiled <- nil
	}
	pid := p.cmd.Process.Pid
	before := takeCPUSnapshot(pid, b.rdb)
	res := runLoad(context.Background(), b.conns, b.duration, 0, requests)
	after := takeCPUSnapshot(pid, b.rdb)
	if err := <-profiled; err != nil {
		return benchRun{}, err
	}
	if prof.mem != "" {
		if err := fetchProfile("http://"+pprofAddr+"/debug/pprof/allocs", prof.mem); err != nil {
			return benchRun{}, err
		}
	}
	if res.Status[http.StatusOK] == 0 {
		return benchRun{}, fmt.Errorf("no request succeeded (statuses %v, transport errors %d)", res.Status, res.Errors)
	}
	return benchRun{rate: res.perSecond(), p50: res.percentile(.5), cpu: before.per(after, res.Requests), rss: peakRSS(pid)}, nil
}

// endpoint runs the seckill endpoint of a server process on backend
// queue, with consumers in the same process (0: an API-only instance).
func (b *bench) endpoint(queue string, consumers int, prof profiles) (benchRun, error) {
	return b.endpointWith(queue, consumers, nil, prof)
}

// endpointWith is endpoint with more of the server's environment.
func (b *bench) endpointWith(queue string, consumers int, env map[string]string, prof profiles) (benchRun, error) {
	c := b.cfg
	c, c.KeyPrefix = c.ForQueue(queue), "bench"+crand.Text()[:4]+":"
	defer dropKeys(c.RedisURL, c.KeyPrefix)
	extra := map[string]string{"SECKILL_CONSUMERS": strconv.Itoa(consumers), "SECKILL_BATCH_SIZE": "500"}
	for k, v := range env {
		extra[k] = v
	}
	pprofAddr := ""
	if prof != (profiles{}) {
		var err error
		if pprofAddr, err = freeAddr(); err != nil {
			return benchRun{}, err
		}
		extra["SECKILL_PPROF_ADDR"] = pprofAddr
	}
	p, err := startProcess(c, extra)
	if err != nil {
		return benchRun{}, err
	}
	var voucher int64
	defer func() {
		// Stopped first: its consumers may still be writing the orders.
		p.stop()
		dropVouchers(c.MySQLDSN, voucher)
	}()
	if voucher, err = createVoucher(p.base, c.AdminToken, faultStock); err != nil {
		return benchRun{}, err
	}
	run, err := b.load(p, voucher, prof, pprofAddr)
	if err != nil {
		return benchRun{}, fmt.Errorf("%s endpoint: %w", queue, err)
	}
	return run, nil
}

// bareHandler runs the baseline: `seckill bare-handler`, optionally with
// go-redis's autopipeliner.
func (b *bench) bareHandler(coalesce bool) (benchRun, error) {
	// The voucher is made by a full server on the same key prefix, so the
	// bare handler finds its stock and window.
	c := b.cfg
	c, c.KeyPrefix = c.ForQueue("streamgroup"), "bench"+crand.Text()[:4]+":"
	defer dropKeys(c.RedisURL, c.KeyPrefix)
	setup, err := startProcess(c, map[string]string{"SECKILL_CONSUMERS": "0"})
	if err != nil {
		return benchRun{}, err
	}
	voucher, err := createVoucher(setup.base, c.AdminToken, faultStock)
	setup.stop()
	if err != nil {
		return benchRun{}, err
	}
	defer dropVouchers(c.MySQLDSN, voucher)
	p, err := startProcessArgs(c, map[string]string{bareCoalesceEnv: strconv.FormatBool(coalesce)}, BareHandlerCommand)
	if err != nil {
		return benchRun{}, err
	}
	defer p.stop()
	run, err := b.load(p, voucher, profiles{}, "")
	if err != nil {
		return benchRun{}, fmt.Errorf("bare handler: %w", err)
	}
	return run, nil
}

// drainBacklog is how many orders the drain runs persist.
const drainBacklog = 100_000

// pairedRatio is the median of a[i] ÷ b[i]: each ratio compares two runs
// made minutes apart at most, so a slow phase of the machine that spans a
// round cancels out; a ratio of the two medians would mix rounds.
func pairedRatio(a, b []float64) float64 {
	ratios := make([]float64, len(a))
	for i := range a {
		ratios[i] = a[i] / b[i]
	}
	return medianOf(ratios)
}

func medianOf(xs []float64) float64 {
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// median is the run of median rate.
func median(runs []benchRun) benchRun {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b benchRun) int { return cmp.Compare(a.rate, b.rate) })
	return sorted[len(sorted)/2]
}

// benchFlags are `seckill-lab bench`'s flags.
type benchFlags struct {
	duration               time.Duration
	conns, rounds          int
	parts                  map[string]bool
	cpuProfile, memProfile string
}

// run reports whether the part is to run (every part without -only).
func (f benchFlags) run(part string) bool { return len(f.parts) == 0 || f.parts[part] }

func parseBenchFlags(args []string) (benchFlags, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	duration := fs.Duration("duration", 6*time.Second, "length of each load run")
	conns := fs.Int("conns", 50, "keep-alive connections")
	rounds := fs.Int("rounds", 5, "rounds of alternated runs (endpoint against the bare handlers, drain against the INSERT loop); the median of each is kept")
	only := fs.String("only", "", "comma-separated parts to run: endpoint, redis, drain, sync, wait, tracing, room, wrk, hot, sale (default all)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the server during the last endpoint run to this file (and of the last wrk run of each case to this file plus .stock-left and .sold-out)")
	memProfile := fs.String("memprofile", "", "write the server's allocation profile after the last endpoint run to this file")
	if err := fs.Parse(args); err != nil {
		return benchFlags{}, err
	}
	f := benchFlags{duration: *duration, conns: *conns, rounds: *rounds, parts: map[string]bool{}, cpuProfile: *cpuProfile, memProfile: *memProfile}
	for _, p := range strings.Split(*only, ",") {
		if p = strings.TrimSpace(p); p != "" {
			f.parts[p] = true
		}
	}
	return f, nil
}

// RunBench is `seckill-lab bench`: the seckill endpoint of a server process
// under load against the baselines, each ratio printed with its target.
// It returns the exit status.
func RunBench(args []string) int {
	flags, err := parseBenchFlags(args)
	if err != nil {
		return 2
	}
	cfg, err := server.LoadConfig(labLookup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.EmbeddedRedis() || cfg.EmbeddedSQL() {
		fmt.Fprintln(os.Stderr, "bench: set SECKILL_REDIS_URL and SECKILL_MYSQL_DSN: the baselines (redis-benchmark, a bare INSERT loop) need real servers")
		return 2
	}
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "bench:", err); return 1 }
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fail(err)
	}
	b := &bench{cfg: cfg, duration: flags.duration, conns: flags.conns, rdb: redis.NewClient(opts)}
	defer b.rdb.Close()
	if n, err := vouchersOnSale(cfg.MySQLDSN); err != nil {
		return fail(err)
	} else if n > 0 {
		// Each server a run starts lists the vouchers on sale and, on the
		// run's fresh keys, rebuilds them: a voucher of 226,000 orders an
		// interrupted lab left once put the Redis ratio at 1.15 and 2.29.
		progressf("bench: warning: the database holds %d voucher(s) on sale that are not the bench's (an interrupted lab or bench leaves its own): "+
			"every server of the run rebuilds them in Redis at start, and the run's figures include it", n)
	}
	results, err := b.runParts(flags)
	if err != nil {
		return fail(err)
	}
	printBenchResults(results)
	return 0
}

// runParts runs the parts the flags ask for, in order, and returns their
// ratios; an error stops the bench.
func (b *bench) runParts(flags benchFlags) ([]benchTarget, error) {
	var results []benchTarget
	var endpoint benchRun
	if flags.run("endpoint") {
		targets, median, err := b.endpointRounds(flags)
		if err != nil {
			return nil, err
		}
		results, endpoint = append(results, targets...), median
	}
	if flags.run("redis") && endpoint.rate > 0 {
		results = append(results, b.redisRatio(endpoint))
	}
	if flags.run("drain") {
		target, err := b.drainRounds(flags.rounds)
		if err != nil {
			return nil, err
		}
		results = append(results, target)
	}
	if flags.run("sync") {
		target, rss, err := b.syncRatio()
		if err != nil {
			return nil, err
		}
		results, endpoint.rss = append(results, target), max(endpoint.rss, rss)
	}
	if flags.run("wait") {
		results = append(results, b.waitCost(flags.rounds))
	}
	if flags.run("tracing") {
		target, err := b.tracingCost(flags.rounds)
		if err != nil {
			return nil, err
		}
		results = append(results, target)
	}
	if flags.run("room") {
		targets, err := b.roomCosts()
		if err != nil {
			return nil, err
		}
		bots, err := b.botShares(min(flags.rounds, 3))
		if err != nil {
			return nil, err
		}
		results = append(append(results, targets...), bots...)
	}
	if flags.run("wrk") {
		targets, err := b.wrkCompare(flags.rounds, flags.duration, flags.cpuProfile)
		if err != nil {
			results = append(results, benchTarget{name: "server on defaults ÷ naive handler, wrk", detail: "not run: " + err.Error()})
		}
		results = append(results, targets...)
	}
	if flags.run("hot") {
		targets, err := b.hotVoucher(min(flags.rounds, 3))
		results = append(results, targets...)
		if err != nil {
			return nil, err
		}
	}
	if flags.run("sale") {
		targets, err := b.fullSale(min(flags.rounds, 3))
		if err != nil {
			return nil, err
		}
		results = append(results, targets...)
	}
	if endpoint.rss > 0 {
		results = append(results, benchTarget{name: "server peak RSS during the load runs (MB)", ratio: float64(endpoint.rss >> 20),
			target: -200, measured: true, detail: "target below 200 MB"})
	}
	return results, nil
}

// endpointRounds runs the endpoint against the bare handlers in
// alternated rounds, so a burst of noise on this shared machine lands on
// both sides instead of on one; the order rotates each round, so no side
// always runs first or last. It returns the ratios and the endpoint's
// median run.
func (b *bench) endpointRounds(flags benchFlags) ([]benchTarget, benchRun, error) {
	var full, bare, coalesced []benchRun
	sides := []struct {
		what string
		run  func(last bool) (benchRun, error)
		into *[]benchRun
	}{
		{fmt.Sprintf("seckill endpoint (streamgroup, API-only instance), %v over %d connections", flags.duration, flags.conns),
			func(last bool) (benchRun, error) {
				var prof profiles
				if last {
					prof = profiles{cpu: flags.cpuProfile, mem: flags.memProfile}
				}
				return b.endpoint("streamgroup", 0, prof)
			}, &full},
		{"bare Fiber handler, one EVALSHA of the same script per request",
			func(bool) (benchRun, error) { return b.bareHandler(false) }, &bare},
		{"the same bare handler through go-redis's AutoPipeline",
			func(bool) (benchRun, error) { return b.bareHandler(true) }, &coalesced},
	}
	for round := 1; round <= flags.rounds; round++ {
		for i := range sides {
			side := sides[(round-1+i)%len(sides)]
			progressf("bench: round %d/%d: %s…", round, flags.rounds, side.what)
			r, err := side.run(round == flags.rounds)
			if err != nil {
				return nil, benchRun{}, err
			}
			progressf("bench:   %.0f req/s; %v", r.rate, r.cpu)
			*side.into = append(*side.into, r)
		}
	}
	for _, f := range []string{flags.cpuProfile, flags.memProfile} {
		if f != "" {
			progressf("bench: profile of the last endpoint run in %s (go tool pprof -top bin/seckill %s)", f, f)
		}
	}
	endpoint, mb, mc := median(full), median(bare), median(coalesced)
	targets := []benchTarget{
		{name: "seckill endpoint ÷ bare Fiber handler running the script",
			ratio: pairedRatio(benchRates(full), benchRates(bare)), target: 1.2, measured: true,
			detail: fmt.Sprintf("median of %d rounds' ratios; median rates %.0f and %.0f req/s", flags.rounds, endpoint.rate, mb.rate)},
		{name: "seckill endpoint ÷ bare handler with AutoPipeline (reported)",
			ratio: pairedRatio(benchRates(full), benchRates(coalesced)), measured: true,
			detail: fmt.Sprintf("median of %d rounds' ratios; median rate %.0f req/s", flags.rounds, mc.rate)},
	}
	progressf("bench: medians, %s", "CPU per request (server / Redis / load generator):")
	for _, row := range []struct {
		name string
		r    benchRun
	}{{"endpoint", endpoint}, {"bare handler", mb}, {"bare + AutoPipeline", mc}} {
		progressf("bench:   %-20s %7.0f req/s  %6.1f / %5.1f / %5.1f µs", row.name, row.r.rate,
			micros(row.r.cpu.Server), micros(row.r.cpu.Redis), micros(row.r.cpu.Load))
	}
	return targets, endpoint, nil
}

// redisRatio sets the endpoint against redis-benchmark running the same
// script.
func (b *bench) redisRatio(endpoint benchRun) benchTarget {
	progressf("bench: redis-benchmark, EVALSHA of the same script…")
	rb, err := redisBenchmarkRate(b.cfg, b.conns)
	if err != nil {
		return benchTarget{name: "seckill endpoint ÷ redis-benchmark EVALSHA", detail: "not run: " + err.Error()}
	}
	return benchTarget{name: "seckill endpoint ÷ redis-benchmark EVALSHA (same script, no pipelining)",
		ratio: endpoint.rate / rb, target: 0.45, measured: true, detail: fmt.Sprintf("%.0f ÷ %.0f req/s", endpoint.rate, rb)}
}

// drainRounds sets the consumers' drain of a backlog against a bare loop
// of INSERTs, in alternated rounds again: the table and InnoDB's
// background work change under both sides alike.
func (b *bench) drainRounds(rounds int) (benchTarget, error) {
	cfg := b.cfg
	var drains, bares []float64
	for round := 1; round <= rounds; round++ {
		progressf("bench: round %d/%d: drain of a %d-order backlog by the consumers, then a bare loop of 500-row INSERTs…", round, rounds, drainBacklog)
		c := cfg
		c = c.ForQueue("streamgroup")
		c.KeyPrefix, c.Consumers, c.Addr = "bench"+crand.Text()[:4]+":", 0, "127.0.0.1:0"
		drain, err := drainRate(c, max(cfg.Consumers, 1), labOptions{conns: b.conns, drainOrders: drainBacklog, vouchers: 1})
		dropKeys(c.RedisURL, c.KeyPrefix)
		if err != nil {
			return benchTarget{}, err
		}
		bare, err := bareInsertRate(cfg.MySQLDSN, drainBacklog, 500)
		if err != nil {
			return benchTarget{}, err
		}
		progressf("bench:   drain %.0f orders/s, bare loop %.0f orders/s", drain, bare)
		drains, bares = append(drains, drain), append(bares, bare)
	}
	return benchTarget{name: "consumer drain ÷ bare multi-row INSERT loop (500 per transaction)",
		ratio: pairedRatio(drains, bares), target: 0.6, measured: true,
		detail: fmt.Sprintf("median of %d rounds' ratios; median rates %.0f and %.0f orders/s", rounds, medianOf(drains), medianOf(bares))}, nil
}

// syncRatio sets streamgroup against sync, both persisting every order:
// streamgroup with its consumers in the same process, sync in the request
// itself. It returns streamgroup's peak RSS too.
func (b *bench) syncRatio() (benchTarget, int64, error) {
	progressf("bench: streamgroup with 2 consumers in the process, then sync, at the same concurrency…")
	sg, err := b.endpoint("streamgroup", 2, profiles{})
	if err != nil {
		return benchTarget{}, 0, err
	}
	progressf("bench:   streamgroup %.0f req/s; %v", sg.rate, sg.cpu)
	sy, err := b.endpoint("sync", 2, profiles{})
	if err != nil {
		return benchTarget{}, 0, err
	}
	progressf("bench:   sync %.0f req/s; %v", sy.rate, sy.cpu)
	return benchTarget{name: "streamgroup ÷ sync throughput (stock that does not sell out)",
		ratio: sg.rate / sy.rate, target: 10, measured: true, detail: fmt.Sprintf("%.0f ÷ %.0f req/s, both persisting", sg.rate, sy.rate)}, sg.rss, nil
}

// printBenchResults prints each ratio with its target and verdict. A
// negative target is a ceiling: the measure must stay under it.
func printBenchResults(results []benchTarget) {
	fmt.Printf("\n%-72s %8s %8s  %s\n", "ratio", "measured", "target", "")
	for _, r := range results {
		if !r.measured {
			fmt.Printf("%-72s %8s %8s  %s\n", r.name, "-", "-", r.detail)
			continue
		}
		verdict, target := "meets", fmt.Sprintf("%8.2f", r.target)
		switch {
		case r.target == 0:
			verdict, target = "reported", fmt.Sprintf("%8s", "-")
		case r.target < 0:
			target = fmt.Sprintf("%8s", fmt.Sprintf("<%.2f", -r.target))
			if r.ratio >= -r.target {
				verdict = "ABOVE CEILING"
			}
		case r.ratio < r.target:
			verdict = "BELOW TARGET"
		}
		fmt.Printf("%-72s %8.2f %s  %s (%s)\n", r.name, r.ratio, target, verdict, r.detail)
	}
}

// waitCost measures the replica-confirmed mode (SECKILL_REDIS_WAIT_REPLICAS=1)
// against the default, both on a primary with one replica and three
// sentinels of the bench's own, the server following them by Sentinel as
// a team using the mode would; alternated rounds, the median of their
// ratios.
func (b *bench) waitCost(rounds int) benchTarget {
	name := "WAIT mode ÷ default, same primary with a replica (reported)"
	var plain, waited []benchRun
	note := withLabT(func(t *labT) {
		set := redistopology.StartSentinelSet(t)
		wb := *b
		wb.cfg.RedisURL = set.URL()
		wb.rdb = redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(set.Primary())})
		t.Cleanup(func() { wb.rdb.Close() })
		err := alternateRounds(rounds, []benchSide{
			{"seckill endpoint on a primary with a replica, default",
				func() (benchRun, error) { return wb.endpointWith("streamgroup", 0, nil, profiles{}) }, &plain},
			{"the same with SECKILL_REDIS_WAIT_REPLICAS=1", func() (benchRun, error) {
				return wb.endpointWith("streamgroup", 0, map[string]string{"SECKILL_REDIS_WAIT_REPLICAS": "1"}, profiles{})
			}, &waited},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	if note != "" {
		return benchTarget{name: name, detail: "not run: " + note}
	}
	mp, mw := median(plain), median(waited)
	return benchTarget{name: name, ratio: pairedRatio(benchRates(waited), benchRates(plain)), measured: true,
		detail: fmt.Sprintf("median of %d rounds' ratios; median rates %.0f and %.0f req/s, p50 %v and %v", rounds, mw.rate, mp.rate, round(mw.p50), round(mp.p50))}
}

// fetchProfile saves a profile from a server's pprof listener.
func fetchProfile(url, path string) error {
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Get(url)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// peakRSS is the high-water mark of a process's resident memory.
func peakRSS(pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// bareCoalesceEnv set to 1 makes the bare handler run its scripts through
// go-redis's autopipeliner: a second reference, what coalescing alone buys.
const bareCoalesceEnv = "SECKILL_BARE_COALESCE"

// BareHandlerCommand is the binary's subcommand that runs RunBareHandler.
const BareHandlerCommand = "bare-handler"

// RunBareHandler serves the baseline (`seckill bare-handler`): a Fiber
// handler that runs the reservation script once per request with go-redis
// and nothing else — no auth, no validation, no metrics.
func RunBareHandler() int {
	return serveBaseline(func(cfg server.Config, rdb *redis.Client) (fiber.Handler, error) {
		var scripter redis.Scripter = rdb
		if coalesce, _ := strconv.ParseBool(os.Getenv(bareCoalesceEnv)); coalesce {
			ap, err := rdb.AutoPipeline()
			if err != nil {
				return nil, err
			}
			scripter = ap
		}
		return bareSeckill(cfg.KeyPrefix, scripter), nil
	})
}

// bareSeckill is the bare handler's route: seckill.lua by EVALSHA with
// the keys and arguments the reservation gives it (redisreserve's
// scriptArgs), its options off — no shopper limit, no request deadline, no
// payment deadline — and the streamgroup hand-off; every request a new
// shopper. TestTheBareHandlerReserves holds it to the script's arity.
func bareSeckill(prefix string, scripter redis.Scripter) fiber.Handler {
	script := redis.NewScript(lua.Seckill)
	keys := redisreserve.Keys{Prefix: prefix}
	var seq atomic.Int64
	return func(c *fiber.Ctx) error {
		vid, _ := strconv.ParseInt(c.Params("id"), 10, 64)
		n := seq.Add(1)
		o := core.Order{ID: n, UserID: n, VoucherID: vid, CreatedAt: time.Now()}
		res, err := script.Run(c.UserContext(), scripter,
			[]string{keys.Stock(vid), keys.Window(vid), keys.Orders(vid), keys.ShardKey("orders", 0), keys.Limit(vid, n), keys.PayByOf(vid)},
			o.UserID, o.ID, core.EncodeOrder(o), 0, 0, 0, vid, "XADD", core.HandoffKey, "*", streamgroup.BodyField, core.HandoffBody).Slice()
		if err != nil {
			return c.Status(503).SendString(err.Error())
		}
		return c.JSON(fiber.Map{"orderId": fmt.Sprint(res[1])})
	}
}

// serveBaseline runs a baseline the bench measures the server against: a
// bare Fiber app on SECKILL_ADDR with /healthz and the seckill route that
// seckill builds over a go-redis client of SECKILL_REDIS_URL. It returns
// the exit status.
func serveBaseline(seckill func(server.Config, *redis.Client) (fiber.Handler, error)) int {
	cfg, err := server.LoadConfig(labLookup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts.PoolSize = 64
	handler, err := seckill(cfg, redis.NewClient(opts))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Post("/api/vouchers/:id/seckill", handler)
	if err := app.Listen(cfg.Addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

var rpsLine = regexp.MustCompile(`([0-9.]+) requests per second`)

// redisBenchmarkRate runs redis-benchmark: EVALSHA of the reservation
// script, conns connections, no pipelining, random users.
func redisBenchmarkRate(cfg server.Config, conns int) (float64, error) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark is not on this machine")
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return 0, err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	sha, err := rdb.ScriptLoad(ctx, lua.Seckill).Result()
	if err != nil {
		return 0, err
	}
	prefix := "bench" + crand.Text()[:4] + ":"
	keys := redisreserve.Keys{Prefix: prefix}
	v := core.Voucher{ID: 1, Stock: faultStock, BeginAt: time.Now().Add(-time.Minute), EndAt: time.Now().Add(time.Hour)}
	res, _ := redisreserve.New(rdb, redisreserve.Config{Prefix: prefix})
	if err := res.LoadVoucher(ctx, v); err != nil {
		return 0, err
	}
	body := string(core.EncodeOrder(core.Order{ID: 1, UserID: 1, VoucherID: 1, CreatedAt: time.Now()}))
	defer dropKeys(cfg.RedisURL, prefix)
	return redisBenchmark(bin, opts.Addr, conns,
		"EVALSHA", sha, "6", keys.Stock(1), keys.Window(1), keys.Orders(1), keys.ShardKey("orders", 0), keys.Limit(1, 0), keys.PayByOf(1),
		"__rand_int__", "__rand_int__", body, "0", "0", "0", "1", "XADD", core.HandoffKey, "*", streamgroup.BodyField, core.HandoffBody)
}

// redisBenchmark runs redis-benchmark's command args at addr: conns
// connections, no pipelining, 200,000 requests, __rand_int__ over 10^8;
// its rate.
func redisBenchmark(bin, addr string, conns int, args ...string) (float64, error) {
	host, port, _ := strings.Cut(addr, ":")
	cmd := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(conns), "-n", "200000", "-r", "100000000", "-q"}, args...)
	out, err := exec.Command(bin, cmd...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %v: %s", err, out)
	}
	m := rpsLine.FindAllStringSubmatch(string(out), -1)
	if len(m) == 0 {
		return 0, fmt.Errorf("redis-benchmark printed no rate: %s", out)
	}
	return strconv.ParseFloat(m[len(m)-1][1], 64)
}

// bareInsertRate inserts n order rows, batch per transaction, with
// database/sql and nothing else, into tb_voucher_order itself: the same
// table the consumers fill, with the same indexes and rows already there
// (an empty scratch table takes inserts markedly faster). Its rows carry a
// voucher id no voucher has, and are deleted afterwards.
func bareInsertRate(dsn string, n, batch int) (float64, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return 0, err
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	ctx := context.Background()
	const table = "tb_voucher_order"
	scratchVoucher := -1 - rand.Int64N(1<<40)
	firstID := int64(1<<62) + rand.Int64N(1<<40)
	defer db.ExecContext(ctx, "DELETE FROM "+table+" WHERE voucher_id = ?", scratchVoucher)
	start := time.Now()
	for done := 0; done < n; done += batch {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		var q strings.Builder
		args := make([]any, 0, batch*3)
		q.WriteString("INSERT INTO " + table + " (id, user_id, voucher_id) VALUES ")
		for i := 0; i < batch; i++ {
			if i > 0 {
				q.WriteString(",")
			}
			q.WriteString("(?,?,?)")
			id := firstID + int64(done+i)
			args = append(args, id, id, scratchVoucher)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			tx.Rollback()
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = stock WHERE voucher_id = 0"); err != nil {
			tx.Rollback()
			return 0, err
		}
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
