package lab

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/seckill-lab/seckill/app/server"
)

// The opening as it happens: shoppers arrive at the voucher's begin time
// whatever the server is doing (open-loop), at a rate stepping past what
// it can serve. Closed-loop load (wrk, runLoad: each connection waits for
// its answer before it sends again) hides both the cold start and what
// happens past capacity: a slow answer delays the next request, so the
// queue it would have built never shows.

// openingFlags are `seckill-lab opening`'s.
type openingFlags struct {
	backends  []string
	multiples []float64
	step      time.Duration
	lead      time.Duration // from the voucher's creation to its begin
	timeout   time.Duration
	conns     int
	measure   time.Duration
}

func parseOpeningFlags(args []string) (openingFlags, error) {
	fs := flag.NewFlagSet("opening", flag.ContinueOnError)
	backends := fs.String("backends", "streamgroup,list,nats", "comma-separated queue backends, one opening each")
	multiples := fs.String("multiples", "0.5,1,2,3", "the steps' arrival rates, as multiples of the capacity measured in the same run")
	step := fs.Duration("step", 4*time.Second, "how long each step lasts")
	lead := fs.Duration("lead", 2*time.Second, "the idle time from the voucher's creation to its beginTime, when the arrivals start")
	timeout := fs.Duration("timeout", 5*time.Second, "a request not answered within this is counted as timed out")
	conns := fs.Int("capacity-conns", 64, "connections of the closed-loop run that measures the capacity")
	measure := fs.Duration("capacity-for", 3*time.Second, "length of the closed-loop run that measures the capacity")
	if err := fs.Parse(args); err != nil {
		return openingFlags{}, err
	}
	f := openingFlags{step: *step, lead: *lead, timeout: *timeout, conns: *conns, measure: *measure}
	for _, b := range strings.Split(*backends, ",") {
		if b = strings.TrimSpace(b); b != "" {
			f.backends = append(f.backends, b)
		}
	}
	for _, m := range strings.Split(*multiples, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(m), 64)
		if err != nil || x <= 0 {
			return openingFlags{}, fmt.Errorf("opening: -multiples: %q is not a positive number", m)
		}
		f.multiples = append(f.multiples, x)
	}
	if len(f.backends) == 0 || len(f.multiples) == 0 || f.step < time.Second {
		return openingFlags{}, fmt.Errorf("opening: name a backend and a multiple, and steps of at least a second")
	}
	return f, nil
}

// RunOpening is `seckill-lab opening`: for each backend a server process
// on the configured Redis and MySQL, its capacity measured closed-loop,
// then a new voucher's opening, open-loop, stepping through the multiples
// of that capacity; a table of each step's first second and its rest.
func RunOpening(args []string) int {
	flags, err := parseOpeningFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := server.LoadConfig(labLookup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.EmbeddedRedis() || cfg.EmbeddedSQL() {
		progressf("opening: on the embedded stand-ins (miniredis, SQLite): these figures are theirs, not the backends' (set SECKILL_REDIS_URL and SECKILL_MYSQL_DSN)")
	}
	var rows []openingRow
	for _, backend := range flags.backends {
		got, err := runOpening(cfg, backend, flags)
		if err != nil {
			fmt.Fprintf(os.Stderr, "opening: %s: %v\n", backend, err)
			return 1
		}
		rows = append(rows, got...)
	}
	printOpening(os.Stdout, rows)
	return 0
}

// runOpening is one backend's opening.
func runOpening(cfg server.Config, backend string, f openingFlags) ([]openingRow, error) {
	c := cfg.ForQueue(backend)
	c.KeyPrefix = "opening" + crand.Text()[:4] + ":"
	defer dropKeys(c.RedisURL, c.KeyPrefix)
	p, err := startProcess(c, nil)
	if err != nil {
		return nil, err
	}
	var vouchers []int64
	defer func() {
		p.stop()
		dropVouchers(c.MySQLDSN, vouchers...)
	}()
	tokens := server.NewTokens(c.JWTSecret, 0)
	capacity, err := measureCapacity(p, tokens, f)
	if err != nil {
		return nil, err
	}
	vouchers = append(vouchers, capacity.voucher)
	progressf("opening: %s: capacity %.0f reservations a second (closed-loop, %d connections, %v)", backend, capacity.perSecond, f.conns, f.measure)
	pacer := stepPacer{step: f.step}
	for _, m := range f.multiples {
		pacer.rates = append(pacer.rates, m*capacity.perSecond)
	}
	total := pacer.total()
	begin := time.Now().Add(f.lead)
	voucher, err := createVoucherAt(p.base, c.AdminToken, int64(total), 1, begin)
	if err != nil {
		return nil, err
	}
	vouchers = append(vouchers, voucher)
	// Each arrival a new shopper, signed before the run (after the
	// capacity run's shoppers).
	signed := mintTokens(tokens, capacity.users+1, int64(total))
	time.Sleep(time.Until(begin.Add(10 * time.Millisecond)))
	results := attackOpening(p.base, voucher, signed, pacer, f.timeout)
	return openingRows(backend, capacity.perSecond, pacer, f.multiples, results), nil
}

// capacityRun is the closed-loop measure of what the server serves.
type capacityRun struct {
	perSecond float64
	voucher   int64
	users     int64
}

// measureCapacity buys from a voucher of ample stock on f.conns
// connections, each waiting for its answer, every request a new shopper:
// the reservations a second the server answers when it sets the pace.
func measureCapacity(p *labProcess, tokens *server.Tokens, f openingFlags) (capacityRun, error) {
	voucher, err := createVoucher(p.base, p.admin, 10_000_000)
	if err != nil {
		return capacityRun{}, err
	}
	expected := tokensFor(f.measure)
	res := runLoad(context.Background(), f.conns, f.measure, 0, buyRequests(p.base, tokens, []int64{voucher}, 1, expected))
	ok := res.Status[http.StatusOK]
	if ok == 0 || res.Duration <= 0 {
		return capacityRun{}, fmt.Errorf("the capacity run reserved nothing (%v, %d transport errors)", res.Status, res.Errors)
	}
	return capacityRun{perSecond: float64(ok) / res.Duration.Seconds(), voucher: voucher, users: max(res.Requests, expected)}, nil
}

// openingHit is one arrival's answer: when it was meant to be sent, how
// long from then until its answer, and what the answer was.
type openingHit struct {
	due     time.Duration
	latency time.Duration
	kind    string
}

// attackOpening sends the schedule's arrivals with vegeta (a worker per
// arrival in flight, as many as it takes, so each is sent when due), hit k
// a seckill of the voucher by the shopper signed[k].
func attackOpening(base string, voucher int64, signed []string, pacer stepPacer, timeout time.Duration) []openingHit {
	url := base + "/api/vouchers/" + idString(voucher) + "/seckill"
	var mu sync.Mutex
	next := 0
	targeter := func(t *vegeta.Target) error {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(signed) {
			return vegeta.ErrNoTargets
		}
		t.Method, t.URL, t.Header = http.MethodPost, url, http.Header{"Authorization": {signed[next]}}
		next++
		return nil
	}
	attacker := vegeta.NewAttacker(vegeta.Timeout(timeout), vegeta.KeepAlive(true), vegeta.Redirects(vegeta.NoFollow))
	start := time.Now()
	hits := make([]openingHit, 0, len(signed))
	for res := range attacker.Attack(targeter, pacer, 0, "opening") {
		due, ok := pacer.due(res.Seq)
		if !ok {
			continue
		}
		hits = append(hits, openingHit{due: due, latency: res.End().Sub(start.Add(due)), kind: answerKind(res)})
	}
	return hits
}

// answerKind names an answer: its status and error code (200, 409
// sold_out, 503 busy…), "timeout" for one not answered in time, "error"
// for a transport failure.
func answerKind(res *vegeta.Result) string {
	if res.Code == 0 {
		if strings.Contains(res.Error, "Timeout") || strings.Contains(res.Error, "deadline") {
			return "timeout"
		}
		return "error"
	}
	if res.Code == http.StatusOK {
		return "200"
	}
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(res.Body, &body)
	return strconv.Itoa(int(res.Code)) + " " + body.Error.Code
}
