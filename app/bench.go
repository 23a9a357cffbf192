package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// `seckill bench` (`make bench`): the load run of the benchmarks. Each
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

func runBench(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	duration := fs.Duration("duration", 10*time.Second, "length of each load run")
	conns := fs.Int("conns", 50, "keep-alive connections")
	only := fs.String("only", "", "comma-separated parts to run: full, bare, redis, drain, sync (default all)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the server during the full-path run to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := LoadConfig(labLookup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.EmbeddedRedis() || cfg.EmbeddedSQL() {
		fmt.Fprintln(os.Stderr, "bench: set SECKILL_REDIS_URL and SECKILL_MYSQL_DSN: the baselines (redis-benchmark, a bare INSERT loop) need real servers")
		return 2
	}
	parts := map[string]bool{}
	for _, p := range strings.Split(*only, ",") {
		if p = strings.TrimSpace(p); p != "" {
			parts[p] = true
		}
	}
	run := func(part string) bool { return len(parts) == 0 || parts[part] }
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "bench:", err); return 1 }
	var results []benchTarget
	var fullRate, bareRate float64

	full := func(queue, profile string) (float64, int64, error) {
		c := cfg
		c.Queue, c.KeyPrefix = queue, "bench"+randomHex(4)+":"
		extra := map[string]string{"SECKILL_CONSUMERS": "2", "SECKILL_BATCH_SIZE": "256"}
		pprofAddr := ""
		if profile != "" {
			if pprofAddr, err = freeAddr(); err != nil {
				return 0, 0, err
			}
			extra["SECKILL_PPROF_ADDR"] = pprofAddr
		}
		p, err := startProcess(c, extra)
		if err != nil {
			return 0, 0, err
		}
		defer p.stop()
		voucher, err := createVoucher(p.base, c.AdminToken, faultStock)
		if err != nil {
			return 0, 0, err
		}
		requests := buyRequests(p.base, newTokens(c.JWTSecret), voucher, 1, tokensFor(*duration))
		profiled := make(chan error, 1)
		if profile != "" {
			// The profile skips the first and last second of the run:
			// connections opening and closing are not the steady state.
			go func() {
				time.Sleep(time.Second)
				profiled <- fetchProfile(pprofAddr, max(*duration-2*time.Second, time.Second), profile)
			}()
		} else {
			profiled <- nil
		}
		load := runLoad(context.Background(), *conns, *duration, 0, requests)
		if load.Status[200] == 0 {
			return 0, 0, fmt.Errorf("%s: no success (statuses %v)", queue, load.Status)
		}
		if err := <-profiled; err != nil {
			return 0, 0, err
		}
		return load.perSecond(), peakRSS(p.cmd.Process.Pid), nil
	}

	if run("full") {
		progress("bench: full seckill path (streamgroup), %v over %d connections…", *duration, *conns)
		var rss int64
		if fullRate, rss, err = full("streamgroup", *cpuProfile); err != nil {
			return fail(err)
		}
		progress("bench:   %.0f req/s, server peak RSS %d MB", fullRate, rss>>20)
		if *cpuProfile != "" {
			progress("bench:   CPU profile in %s (go tool pprof -top %s)", *cpuProfile, *cpuProfile)
		}
		results = append(results, benchTarget{name: "server peak RSS during the load run (MB)", ratio: float64(rss >> 20),
			target: -200, measured: true, detail: "target below 200 MB"})
	}
	if run("bare") {
		progress("bench: bare Fiber handler, one EVALSHA of the same script per request…")
		if bareRate, err = bareHandlerRate(cfg, *conns, *duration); err != nil {
			return fail(err)
		}
		progress("bench:   %.0f req/s", bareRate)
	}
	if fullRate > 0 && bareRate > 0 {
		results = append(results, benchTarget{name: "seckill endpoint ÷ bare Fiber handler running the script", ratio: fullRate / bareRate,
			target: 1.2, measured: true, detail: fmt.Sprintf("%.0f ÷ %.0f req/s", fullRate, bareRate)})
	}
	if run("redis") && fullRate > 0 {
		progress("bench: redis-benchmark, EVALSHA of the same script…")
		if rb, err := redisBenchmarkRate(cfg, *conns); err != nil {
			results = append(results, benchTarget{name: "seckill endpoint ÷ redis-benchmark EVALSHA", detail: "not run: " + err.Error()})
		} else {
			results = append(results, benchTarget{name: "seckill endpoint ÷ redis-benchmark EVALSHA (same script, no pipelining)",
				ratio: fullRate / rb, target: 0.45, measured: true, detail: fmt.Sprintf("%.0f ÷ %.0f req/s", fullRate, rb)})
		}
	}
	if run("drain") {
		progress("bench: drain rate of the consumers, and a bare loop of 500-row INSERTs…")
		c := cfg
		c.Queue, c.KeyPrefix, c.Consumers = "streamgroup", "bench"+randomHex(4)+":", 0
		drain, err := drainRate(c, max(cfg.Consumers, 1), labOptions{conns: *conns, drainOrders: 20000})
		if err != nil {
			return fail(err)
		}
		bare, err := bareInsertRate(cfg.MySQLDSN, 100000, 500)
		if err != nil {
			return fail(err)
		}
		results = append(results, benchTarget{name: "consumer drain ÷ bare multi-row INSERT loop (500 per transaction)",
			ratio: drain / bare, target: 0.6, measured: true, detail: fmt.Sprintf("%.0f ÷ %.0f orders/s", drain, bare)})
	}
	if run("sync") && fullRate > 0 {
		progress("bench: sync at the same concurrency…")
		syncRate, _, err := full("sync", "")
		if err != nil {
			return fail(err)
		}
		results = append(results, benchTarget{name: "streamgroup ÷ sync throughput (stock that does not sell out)",
			ratio: fullRate / syncRate, target: 10, measured: true, detail: fmt.Sprintf("%.0f ÷ %.0f req/s", fullRate, syncRate)})
	}

	fmt.Printf("\n%-72s %8s %8s  %s\n", "ratio", "measured", "target", "")
	for _, r := range results {
		if !r.measured {
			fmt.Printf("%-72s %8s %8s  %s\n", r.name, "-", "-", r.detail)
			continue
		}
		verdict := "meets"
		switch {
		case r.target < 0 && r.ratio >= -r.target, r.target > 0 && r.ratio < r.target:
			verdict = "BELOW TARGET"
		}
		fmt.Printf("%-72s %8.2f %8.2f  %s (%s)\n", r.name, r.ratio, abs(r.target), verdict, r.detail)
	}
	return 0
}

// fetchProfile saves a CPU profile of length d from a server's pprof
// listener.
func fetchProfile(addr string, d time.Duration, path string) error {
	client := &http.Client{Timeout: d + 30*time.Second}
	resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cpu profile: %s", resp.Status)
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

func abs(f float64) float64 { return max(f, -f) }

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

// runBareHandler serves the baseline (`seckill bare-handler`): a Fiber
// handler that runs the reservation script once per request with go-redis
// and nothing else — no auth, no validation, no metrics.
func runBareHandler() int {
	cfg, err := LoadConfig(labLookup)
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
	rdb := redis.NewClient(opts)
	script := redis.NewScript(lua.Seckill)
	keys := redisreserve.Keys{Prefix: cfg.KeyPrefix}
	var seq atomic.Int64
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Post("/api/vouchers/:id/seckill", func(c *fiber.Ctx) error {
		vid, _ := strconv.ParseInt(c.Params("id"), 10, 64)
		n := seq.Add(1)
		o := core.Order{ID: n, UserID: n, VoucherID: vid, CreatedAt: time.Now()}
		res, err := script.Run(c.UserContext(), rdb,
			[]string{keys.Stock(vid), keys.Window(vid), keys.Orders(vid), cfg.KeyPrefix + "orders"},
			o.UserID, o.ID, core.EncodeOrder(o), "xadd").Slice()
		if err != nil {
			return c.Status(503).SendString(err.Error())
		}
		return c.JSON(fiber.Map{"orderId": fmt.Sprint(res[1])})
	})
	if err := app.Listen(cfg.Addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func bareHandlerRate(cfg Config, conns int, duration time.Duration) (float64, error) {
	// The voucher is made by a full server on the same key prefix, so the
	// bare handler finds its stock and window.
	c := cfg
	c.Queue, c.KeyPrefix = "streamgroup", "bench"+randomHex(4)+":"
	setup, err := startProcess(c, map[string]string{"SECKILL_CONSUMERS": "0"})
	if err != nil {
		return 0, err
	}
	voucher, err := createVoucher(setup.base, c.AdminToken, faultStock)
	setup.stop()
	if err != nil {
		return 0, err
	}
	p, err := startProcessArgs(c, nil, "bare-handler")
	if err != nil {
		return 0, err
	}
	defer p.stop()
	load := runLoad(context.Background(), conns, duration, 0, buyRequests(p.base, newTokens(c.JWTSecret), voucher, 1, tokensFor(duration)))
	if load.Status[200] == 0 {
		return 0, fmt.Errorf("bare handler: no success (statuses %v)", load.Status)
	}
	return load.perSecond(), nil
}

var rpsLine = regexp.MustCompile(`([0-9.]+) requests per second`)

// redisBenchmarkRate runs redis-benchmark: EVALSHA of the reservation
// script, conns connections, no pipelining, random users.
func redisBenchmarkRate(cfg Config, conns int) (float64, error) {
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
	prefix := "bench" + randomHex(4) + ":"
	keys := redisreserve.Keys{Prefix: prefix}
	v := core.Voucher{ID: 1, Stock: faultStock, BeginAt: time.Now().Add(-time.Minute), EndAt: time.Now().Add(time.Hour)}
	res, _ := redisreserve.New(rdb, redisreserve.Config{Prefix: prefix})
	if err := res.LoadVoucher(ctx, v); err != nil {
		return 0, err
	}
	body := string(core.EncodeOrder(core.Order{ID: 1, UserID: 1, VoucherID: 1, CreatedAt: time.Now()}))
	host, port, _ := strings.Cut(opts.Addr, ":")
	out, err := exec.Command(bin, "-h", host, "-p", port, "-c", strconv.Itoa(conns), "-n", "200000", "-r", "100000000", "-q",
		"EVALSHA", sha, "4", keys.Stock(1), keys.Window(1), keys.Orders(1), prefix+"orders",
		"__rand_int__", "__rand_int__", body, "xadd").CombinedOutput()
	defer func() {
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	}()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %v: %s", err, out)
	}
	m := rpsLine.FindAllStringSubmatch(string(out), -1)
	if len(m) == 0 {
		return 0, fmt.Errorf("redis-benchmark printed no rate: %s", out)
	}
	return strconv.ParseFloat(m[len(m)-1][1], 64)
}

// bareInsertRate inserts n order rows, batch per transaction, into a
// scratch copy of tb_voucher_order, with database/sql and nothing else.
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
	table := "bench_orders_" + randomHex(4)
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" LIKE tb_voucher_order"); err != nil {
		return 0, err
	}
	defer db.ExecContext(ctx, "DROP TABLE "+table)
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
			id := int64(done + i + 1)
			args = append(args, id, id, 1)
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
