package lab

import (
	crand "crypto/rand"

	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/app/server"
	"github.com/seckill-lab/seckill/lua"
)

// The skeptical user's measurement: an outside load tool (wrk) against the
// server on its defaults, and against the smallest handler anyone would
// write first — the naive reference below — sent the same requests.

// NaiveHandlerCommand is the binary's subcommand that runs RunNaiveHandler.
const NaiveHandlerCommand = "naive-handler"

// naiveScript is lua/naive.lua: the seed's original reservation, as the
// classic design first writes it.
var naiveScript = lua.Naive

// naiveKeys are the naive handler's keys for a voucher, under prefix.
func naiveKeys(prefix string, voucher int64) []string {
	v := strconv.FormatInt(voucher, 10)
	return []string{prefix + "naive:stock:" + v, prefix + "naive:order:" + v, prefix + "naive:orders"}
}

// RunNaiveHandler serves the naive reference (`seckill naive-handler`):
// Fiber and go-redis, one EVALSHA of naiveScript per request, no
// pipelining, no auth (the token header is ignored; each request is a new
// user), no validation, no metrics.
func RunNaiveHandler() int {
	return serveBaseline(func(cfg server.Config, rdb *redis.Client) (fiber.Handler, error) {
		script := redis.NewScript(naiveScript)
		var users atomic.Int64
		return func(c *fiber.Ctx) error {
			vid, _ := strconv.ParseInt(c.Params("id"), 10, 64)
			user := users.Add(1)
			code, err := script.Run(c.UserContext(), rdb, naiveKeys(cfg.KeyPrefix, vid), user, vid, user).Int()
			switch {
			case err != nil:
				return c.Status(503).SendString(err.Error())
			case code == 1:
				return c.Status(409).JSON(fiber.Map{"error": "sold out"})
			case code == 2:
				return c.Status(409).JSON(fiber.Map{"error": "already purchased"})
			}
			return c.JSON(fiber.Map{"orderId": strconv.FormatInt(user, 10)})
		}, nil
	})
}

// wrkScript cycles pre-signed tokens over the vouchers so that every
// request of a run is a new shopper–voucher pair: request i carries token
// i mod T on voucher (i div T + i) mod V, each thread taking every
// threads-th i.
const wrkScript = `
local tokens, vouchers = {}, {}
local i, step = 0, 1
local nextThread = 0
function setup(thread)
  thread:set("first", nextThread)
  nextThread = nextThread + 1
end
function init(args)
  for line in io.lines(args[1]) do tokens[#tokens + 1] = line end
  for v in string.gmatch(args[2], "%d+") do vouchers[#vouchers + 1] = v end
  i, step = first, tonumber(args[3])
end
function request()
  local n = i
  i = i + step
  local t = tokens[(n % #tokens) + 1]
  local v = vouchers[((math.floor(n / #tokens) + n) % #vouchers) + 1]
  return wrk.format("POST", "/api/vouchers/" .. v .. "/seckill", {["Authorization"] = "Bearer " .. t}, nil)
end
`

// wrkRun is what one wrk run printed.
type wrkRun struct {
	rate   float64
	non2xx int64
	// cpu is what one request cost the server, Redis and wrk.
	cpu cpuShare
}

var (
	wrkRate   = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkNon2xx = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
)

// wrkLoad runs `wrk -t2 -c<conns> -d<duration>` with wrkScript against
// base, on the vouchers, with the tokens in tokenFile.
func wrkLoad(base, tokenFile string, vouchers []int64, conns int, duration time.Duration) (wrkRun, error) {
	bin, err := exec.LookPath("wrk")
	if err != nil {
		return wrkRun{}, fmt.Errorf("wrk is not on this machine (Debian: apt-get install -y wrk)")
	}
	script := filepath.Join(filepath.Dir(tokenFile), "seckill.lua")
	if err := os.WriteFile(script, []byte(wrkScript), 0o644); err != nil {
		return wrkRun{}, err
	}
	ids := make([]string, len(vouchers))
	for i, v := range vouchers {
		ids[i] = idString(v)
	}
	const threads = 2
	cmd := exec.Command(bin, "-t"+strconv.Itoa(threads), "-c"+strconv.Itoa(conns), "-d"+duration.String(),
		"-s", script, base, "--", tokenFile, strings.Join(ids, ","), strconv.Itoa(threads))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkRun{}, fmt.Errorf("wrk: %v: %s", err, out)
	}
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		return wrkRun{}, fmt.Errorf("wrk printed no rate: %s", out)
	}
	r := wrkRun{}
	r.rate, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		r.non2xx, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if n := time.Duration(r.rate * duration.Seconds()); n > 0 {
		r.cpu.Load = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()) / n
	}
	return r, nil
}

// writeTokens signs n shoppers' tokens, one per line, into a file of dir.
func writeTokens(dir string, tokens *server.Tokens, n int64) (string, error) {
	path := filepath.Join(dir, "tokens.txt")
	var b strings.Builder
	for _, t := range mintTokens(tokens, 1, n) {
		b.WriteString(strings.TrimPrefix(t, "Bearer "))
		b.WriteByte('\n')
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// wrkCase is one row of the wrk comparison: the server's vouchers and the
// naive handler's, in the state the case needs.
type wrkCase struct {
	name     string
	target   float64
	soldOut  bool
	vouchers int // the requests go round this many
	server   []float64
	naive    []float64
	non2xx   [2]int64 // of the last round: server, naive
	wantCode int      // what every request of the case is answered
	// redisPerOrder: Redis's CPU per accepted order (the change in INFO's
	// used_cpu_sys + used_cpu_user over the run ÷ the requests answered
	// 2xx), each round's, server then naive; kept where orders are
	// accepted (stock left).
	redisPerOrder [2][]time.Duration
}

const (
	wrkVouchers = 32
	// wrkTokens: every request of a run is a new shopper–voucher pair, on
	// one hot voucher too (the server answers about 30,000 a second here
	// for 6 s).
	wrkTokens = 300_000
)

// wrkCompare runs the server on its defaults (API-only, per-shopper limit
// on) and the naive handler under wrk, alternating, for the stock-left and
// the sold-out cases; it returns each case's median paired ratio.
//
// With cpuProfile set, the server's last run of each case is profiled into
// cpuProfile plus ".stock-left" or ".sold-out".
func (b *bench) wrkCompare(rounds int, duration time.Duration, cpuProfile string) ([]benchTarget, error) {
	dir, err := os.MkdirTemp("", "seckill-wrk-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tokenFile, err := writeTokens(dir, server.NewTokens(b.cfg.JWTSecret, 0), wrkTokens)
	if err != nil {
		return nil, err
	}
	cases := []*wrkCase{
		{name: "stock left", target: 1.2, wantCode: http.StatusOK, vouchers: wrkVouchers},
		// A flash sale's own case: every shopper after one voucher, whose
		// every reservation runs on the one Redis master that owns it.
		{name: "stock left, one voucher", target: 1.2, wantCode: http.StatusOK, vouchers: 1},
		{name: "sold out", target: 2, soldOut: true, wantCode: http.StatusConflict, vouchers: wrkVouchers},
	}
	for round := 1; round <= rounds; round++ {
		for _, c := range cases {
			for i := range 2 {
				side := []string{"server", "naive"}[(round+1+i)%2] // alternate which side runs first
				progressf("bench: round %d/%d: wrk, %s, %s…", round, rounds, c.name, side)
				prof := ""
				if cpuProfile != "" && side == "server" && round == rounds {
					prof = cpuProfile + "." + strings.ReplaceAll(c.name, " ", "-")
				}
				r, err := b.wrkSide(side, c, tokenFile, duration, prof)
				if err != nil {
					return nil, err
				}
				progressf("bench:   %.0f req/s, %d answered other than 2xx; %v", r.rate, r.non2xx, r.cpu)
				at := 0
				if side == "server" {
					c.server, c.non2xx[0] = append(c.server, r.rate), r.non2xx
				} else {
					at = 1
					c.naive, c.non2xx[1] = append(c.naive, r.rate), r.non2xx
				}
				if !c.soldOut {
					c.redisPerOrder[at] = append(c.redisPerOrder[at], r.redisPerAccepted(duration))
				}
			}
		}
	}
	var out []benchTarget
	for _, c := range cases {
		out = append(out, benchTarget{
			name:  fmt.Sprintf("server on defaults ÷ naive handler, wrk, %s", c.name),
			ratio: pairedRatio(c.server, c.naive), target: c.target, measured: true,
			detail: fmt.Sprintf("median of %d rounds' ratios (spread %s); median rates %.0f and %.0f req/s; non-2xx in the last round %d and %d",
				rounds, spread(c.server, c.naive), medianOf(c.server), medianOf(c.naive), c.non2xx[0], c.non2xx[1]),
		})
		if server, naive := microsOf(c.redisPerOrder[0]), microsOf(c.redisPerOrder[1]); len(server) > 0 && len(server) == len(naive) {
			// At most (a negative target): Redis is the part of a sale one
			// hot voucher cannot scale out, so its work per order is the
			// voucher's ceiling.
			out = append(out, benchTarget{
				name:  fmt.Sprintf("Redis CPU per accepted order, server ÷ naive handler, wrk, %s (at most)", c.name),
				ratio: pairedRatio(server, naive), target: -0.8, measured: true,
				detail: fmt.Sprintf("median of %d rounds' ratios (spread %s); median %.1f and %.1f µs per order",
					rounds, spread(server, naive), medianOf(server), medianOf(naive)),
			})
		}
	}
	return out, nil
}

func microsOf(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = micros(d)
	}
	return out
}

// redisPerAccepted is Redis's CPU per request answered 2xx: the run's
// Redis CPU per request times requests ÷ accepted (requests from the rate,
// as wrk reports no count).
func (r wrkRun) redisPerAccepted(duration time.Duration) time.Duration {
	requests := r.rate * duration.Seconds()
	accepted := requests - float64(r.non2xx)
	if accepted <= 0 {
		return 0
	}
	return time.Duration(float64(r.cpu.Redis) * requests / accepted)
}

// spread prints the lowest and highest of the rounds' ratios: the noise
// of the machine, beside the median.
func spread(a, b []float64) string {
	lo, hi := a[0]/b[0], a[0]/b[0]
	for i := range a {
		r := a[i] / b[i]
		lo, hi = min(lo, r), max(hi, r)
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}

// wrkSide starts one side of a case on fresh keys, puts its vouchers in
// the case's state, runs wrk and stops it.
func (b *bench) wrkSide(side string, c *wrkCase, tokenFile string, duration time.Duration, cpuProfile string) (wrkRun, error) {
	cfg := b.cfg
	cfg.Queue, cfg.KeyPrefix = "streamgroup", "bench"+crand.Text()[:4]+":"
	defer dropKeys(cfg.RedisURL, cfg.KeyPrefix)
	start := startNaiveSide
	if side == "server" {
		start = startServerSide
	}
	ws, err := start(cfg, c, cpuProfile)
	if ws.stop != nil {
		defer ws.stop()
	}
	if err != nil {
		return wrkRun{}, err
	}
	p := ws.process
	profiled := make(chan error, 1)
	if ws.pprofAddr != "" {
		// The first and last second of the run left out, as the endpoint's.
		go func() {
			time.Sleep(time.Second)
			secs := max(int((duration - 2*time.Second).Seconds()), 1)
			profiled <- fetchProfile(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", ws.pprofAddr, secs), cpuProfile)
		}()
	} else {
		profiled <- nil
	}
	server, redisBefore, statsBefore := processCPU(p.cmd.Process.Pid), redisCPU(b.rdb), commandStats(b.rdb)
	r, err := wrkLoad(p.base, tokenFile, ws.vouchers, b.conns, duration)
	if n := time.Duration(r.rate * duration.Seconds()); err == nil && n > 0 {
		r.cpu.Server = (processCPU(p.cmd.Process.Pid) - server) / n
		r.cpu.Redis = (redisCPU(b.rdb) - redisBefore) / n
		progressf("bench:   Redis per request, by command (calls, time inside the command): %s",
			perRequest(statsBefore, commandStats(b.rdb), float64(n)))
	}
	if perr := <-profiled; perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return wrkRun{}, fmt.Errorf("%s, %s: %w", c.name, side, err)
	}
	if want2xx := c.wantCode == http.StatusOK; want2xx && r.non2xx > 0 {
		return r, fmt.Errorf("%s, %s: %d requests answered other than 2xx where every one should buy", c.name, side, r.non2xx)
	}
	return r, nil
}

// wrkTarget is one side of a wrk case, started: its process, the vouchers
// wrk buys, where its profiler listens (if asked), and what stops it all.
type wrkTarget struct {
	process   *labProcess
	vouchers  []int64
	pprofAddr string
	stop      func()
}

// caseStock is the stock each of a case's vouchers starts the run with.
func caseStock(c *wrkCase) int64 {
	if c.soldOut {
		return 0
	}
	return faultStock
}

// startServerSide starts the server on the defaults a user gets, with
// the case's vouchers created (and, sold out, each one's unit bought).
func startServerSide(cfg server.Config, c *wrkCase, cpuProfile string) (ws wrkTarget, err error) {
	var stops []func()
	ws.stop = func() {
		slices.Reverse(stops)
		for _, f := range stops {
			f()
		}
	}
	env := userDefaults(map[string]string{"SECKILL_CONSUMERS": "0"})
	if cpuProfile != "" {
		if ws.pprofAddr, err = freeAddr(); err != nil {
			return ws, err
		}
		env["SECKILL_PPROF_ADDR"] = ws.pprofAddr
	}
	if ws.process, err = startProcess(cfg, env); err != nil {
		return ws, err
	}
	stops = append(stops, ws.process.stop)
	stops = append(stops, func() { dropVouchers(cfg.MySQLDSN, ws.vouchers...) })
	for range c.vouchers {
		v, err := createVoucher(ws.process.base, cfg.AdminToken, max(caseStock(c), 1))
		if err != nil {
			return ws, err
		}
		ws.vouchers = append(ws.vouchers, v)
	}
	if c.soldOut {
		// Each voucher's one unit bought before the run: the sale is in
		// its sold-out phase.
		tokens := server.NewTokens(cfg.JWTSecret, 0)
		for _, v := range ws.vouchers {
			if err := buyOnce(ws.process.base, tokens, v, wrkTokens+1); err != nil {
				return ws, err
			}
		}
	}
	return ws, nil
}

// startNaiveSide starts the naive handler with the case's vouchers' stock
// set in Redis.
func startNaiveSide(cfg server.Config, c *wrkCase, _ string) (ws wrkTarget, err error) {
	if ws.process, err = startProcessArgs(cfg, nil, NaiveHandlerCommand); err != nil {
		return ws, err
	}
	ws.stop = ws.process.stop
	rdb, err := server.OpenRedis(context.Background(), cfg.RedisURL)
	if err != nil {
		return ws, err
	}
	defer rdb.Close()
	for v := int64(1); v <= int64(c.vouchers); v++ {
		if err := rdb.Set(context.Background(), naiveKeys(cfg.KeyPrefix, v)[0], caseStock(c), 0).Err(); err != nil {
			return ws, err
		}
		ws.vouchers = append(ws.vouchers, v)
	}
	return ws, nil
}

// userDefaults is the environment of a server process on the defaults a
// user gets: an empty value leaves a variable to its default, undoing what
// the lab sets for its own runs (limits off, a slow single consumer), with
// the overrides on top.
func userDefaults(overrides map[string]string) map[string]string {
	env := map[string]string{"SECKILL_SECKILL_RATE": "", "SECKILL_CODE_RATE": "", "SECKILL_CONSUMERS": "",
		"SECKILL_BATCH_SIZE": "", "SECKILL_CLAIM_MIN_IDLE": ""}
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

// buyOnce buys a voucher as one shopper and expects 200.
func buyOnce(base string, tokens *server.Tokens, voucher, user int64) error {
	tok, _ := tokens.Issue(user, time.Now())
	req, _ := http.NewRequest(http.MethodPost, base+"/api/vouchers/"+idString(voucher)+"/seckill", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("buying voucher %d: status %d", voucher, resp.StatusCode)
	}
	return nil
}

const (
	saleItems    = 20_000
	saleShoppers = 200_000
)

// fullSale is the sale-shaped run: saleShoppers new shoppers for saleItems
// items on one voucher, most of them after the sell-out, sent as fast as
// b.conns connections go — to the server on its defaults (consumers in the
// process) and to the naive handler, the same requests, alternated over
// rounds. It returns the wall-time ratio and the time from the server's
// last answer to its last order in MySQL.
func (b *bench) fullSale(rounds int) ([]benchTarget, error) {
	st, err := mysqlstore.OpenMySQL(context.Background(), b.cfg.MySQLDSN, 0)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var serverWall, naiveWall []float64
	var serverCPU, naiveCPU []cpuShare
	var lastRow time.Duration
	for round := 1; round <= rounds; round++ {
		for i := range 2 {
			side := []string{"server", "naive"}[(round+i)%2]
			progressf("bench: round %d/%d: a full sale, %d shoppers for %d items, %s…", round, rounds, saleShoppers, saleItems, side)
			wall, toRow, cpu, err := b.saleSide(side, st)
			if err != nil {
				return nil, err
			}
			if side == "server" {
				serverWall, serverCPU, lastRow = append(serverWall, wall.Seconds()), append(serverCPU, cpu), max(lastRow, toRow)
				progressf("bench:   last answer after %v, last order in MySQL %v after it; %v", wall.Round(time.Millisecond), toRow.Round(time.Millisecond), cpu)
			} else {
				naiveWall, naiveCPU = append(naiveWall, wall.Seconds()), append(naiveCPU, cpu)
				progressf("bench:   last answer after %v; %v", wall.Round(time.Millisecond), cpu)
			}
		}
	}
	return []benchTarget{
		{name: "full sale: server's wall time ÷ naive handler's, to the last answer", ratio: pairedRatio(serverWall, naiveWall),
			target: -0.5, measured: true, detail: fmt.Sprintf("target at most 0.5; median of %d rounds (spread %s); medians %.2f s and %.2f s; "+
				"median CPU per request, server (consumers included) / Redis / load generator: %s against %s",
				rounds, spread(serverWall, naiveWall), medianOf(serverWall), medianOf(naiveWall), medianCPU(serverCPU).brief(), medianCPU(naiveCPU).brief())},
		{name: "full sale: last order in MySQL after the last answer (s)", ratio: lastRow.Seconds(), target: -5, measured: true,
			detail: fmt.Sprintf("target under 5 s; the longest of %d rounds", rounds)},
	}, nil
}

// saleSide runs one full sale on one side and checks that it sold exactly
// the items.
func (b *bench) saleSide(side string, st *mysqlstore.Store) (wall, toRow time.Duration, cpu cpuShare, err error) {
	cfg := b.cfg
	cfg.Queue, cfg.KeyPrefix = "streamgroup", "bench"+crand.Text()[:4]+":"
	defer dropKeys(cfg.RedisURL, cfg.KeyPrefix)
	tokens := server.NewTokens(cfg.JWTSecret, 0)
	var p *labProcess
	var voucher int64
	if side == "server" {
		if p, err = startProcess(cfg, userDefaults(nil)); err != nil {
			return 0, 0, cpuShare{}, err
		}
		if voucher, err = createVoucher(p.base, cfg.AdminToken, saleItems); err != nil {
			p.stop()
			return 0, 0, cpuShare{}, err
		}
		defer dropVouchers(cfg.MySQLDSN, voucher)
	} else {
		if p, err = startProcessArgs(cfg, nil, NaiveHandlerCommand); err != nil {
			return 0, 0, cpuShare{}, err
		}
		rdb, err := server.OpenRedis(context.Background(), cfg.RedisURL)
		if err != nil {
			p.stop()
			return 0, 0, cpuShare{}, err
		}
		voucher = 1
		err = rdb.Set(context.Background(), naiveKeys(cfg.KeyPrefix, voucher)[0], saleItems, 0).Err()
		rdb.Close()
		if err != nil {
			p.stop()
			return 0, 0, cpuShare{}, err
		}
	}
	defer p.stop()
	requests := buyRequests(p.base, tokens, []int64{voucher}, 1, saleShoppers) // signs the tokens: before the CPU is counted
	before := takeCPUSnapshot(p.cmd.Process.Pid, b.rdb)
	res := runLoad(context.Background(), b.conns, 10*time.Minute, saleShoppers, requests)
	wall = res.Duration
	if ok := res.Status[http.StatusOK]; ok != saleItems || res.Errors > 0 {
		return 0, 0, cpuShare{}, fmt.Errorf("full sale, %s: %d accepted of %d items (statuses %v, transport errors %d)", side, ok, saleItems, res.Status, res.Errors)
	}
	if side == "server" {
		ended := time.Now()
		rows := waitFor(func() int64 {
			n, err := st.DB().NewSelect().Table("tb_voucher_order").Where("voucher_id = ?", voucher).Count(context.Background())
			if err != nil {
				return -1
			}
			return int64(n)
		}, saleItems, time.Minute)
		toRow = time.Since(ended)
		if rows != saleItems {
			return 0, 0, cpuShare{}, fmt.Errorf("full sale: %d of %d accepted orders in MySQL a minute after the last answer", rows, saleItems)
		}
	}
	// Taken once the orders are in MySQL, so that the server's CPU
	// includes its consumers' (MariaDB's own is not counted).
	cpu = before.per(takeCPUSnapshot(p.cmd.Process.Pid, b.rdb), saleShoppers)
	return wall, toRow, cpu, nil
}

// commandStat is one command's line of INFO commandstats.
type commandStat struct {
	calls int64
	usec  float64
}

// commandStats is INFO commandstats so far, by command (nil when Redis
// does not answer: the breakdown is then left out).
func commandStats(rdb *redis.Client) map[string]commandStat {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return nil
	}
	out := map[string]commandStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var st commandStat
		for _, field := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[name] = st
	}
	return out
}

// perRequest is what each command cost Redis per request between two
// commandstats readings, costliest first: where the reservation's Redis
// time goes (a script's time includes the commands it calls, which are
// counted under their own names too).
func perRequest(before, after map[string]commandStat, requests float64) string {
	type row struct {
		name        string
		calls, usec float64
	}
	var rows []row
	for name, a := range after {
		b := before[name]
		if d := a.calls - b.calls; d > 0 {
			rows = append(rows, row{name, float64(d) / requests, (a.usec - b.usec) / requests})
		}
	}
	slices.SortFunc(rows, func(x, y row) int { return cmp.Compare(y.usec, x.usec) })
	var out []string
	for _, r := range rows[:min(len(rows), 12)] {
		out = append(out, fmt.Sprintf("%s %.3g× %.2fµs", r.name, r.calls, r.usec))
	}
	return strings.Join(out, ", ")
}
