package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/app/server"
)

// The lifecycle lab (`seckill-lab lifecycle`, `make lifecycle`): what happens
// after the reservation, per backend and per expiry mechanism
// (SECKILL_EXPIRY). A sale where a share of the buyers never pay while new
// shoppers keep coming measures how soon an expired unit is sold again and
// how many units the sale ends with unsold; then the races of the
// lifecycle are injected one by one, each checked against the invariants
// (every order ends paid, cancelled or refunded; the database's stock is
// the initial stock less the live orders; Redis's equals it; no unit came
// back twice). Real servers only: the instances are separate processes of
// this binary, two at a time, so that one can be killed.

// lifecycleRaces are the columns of the race table.
var lifecycleRaces = []string{
	"payment completed at the deadline",
	"shopper cancels while paying",
	"payment notified after the expiry",
	"instance SIGKILLed mid-expiry",
	"Redis restarted empty, unpaid orders pending",
	"no consumer: orders still queued at their deadline",
}

type lifecycleOptions struct {
	window      time.Duration
	units       int
	neverPayPct int
	raceOrders  int
	only        string
	expiries    string
	out         string
	noRaces     bool
}

// lifecycleResult is one backend under one expiry mechanism.
type lifecycleResult struct {
	Backend, Expiry string
	Resale          resaleResult
	Races           []raceResult
}

// resaleResult is the sale where some buyers never pay.
type resaleResult struct {
	Note string // why it did not run, or what went wrong
	Ran  bool
	// Units on sale; NeverPaid: first buyers who never paid.
	Units, NeverPaid int
	// Expired: orders cancelled at their deadline; Resold: of their units,
	// those sold again to a later shopper; Unsold: units neither paid nor
	// held at the end.
	Expired, Resold, Unsold int
	// From an expired order's deadline to the next order accepted for the
	// voucher; ExpiredP50/P99: from the deadline to the cancellation (the
	// mechanism's part of it).
	P50, P99, Max          time.Duration
	ExpiredP50, ExpiredP99 time.Duration
	// Shoppers: new shoppers who came while the sale ran; Took: from the
	// first buyer to the last unit paid (or to the end of the wait).
	Shoppers int
	Took     time.Duration
}

// raceResult is one race of the lifecycle, checked.
type raceResult struct {
	Note                      string
	Ran                       bool
	Orders                    int
	Paid, Cancelled, Refunded int
	// Held: every invariant held; Broken names the first that did not.
	Held   bool
	Broken string
	// BackIn (the kill and the Redis loss): from the last deadline to
	// every unit on sale again in both stores; StruckAt: orders already
	// expired when the instance died.
	BackIn   time.Duration
	StruckAt int
}

// RunLifecycle is `seckill-lab lifecycle`. It returns the exit status.
func RunLifecycle(args []string) int {
	fs := flag.NewFlagSet("lifecycle", flag.ContinueOnError)
	var o lifecycleOptions
	fs.DurationVar(&o.window, "pay-window", 3*time.Second, "SECKILL_PAY_WINDOW of the instances")
	fs.IntVar(&o.units, "units", 100, "units of the sale where some buyers never pay")
	fs.IntVar(&o.neverPayPct, "never-pay", 30, "percentage of the first buyers who never pay")
	fs.IntVar(&o.raceOrders, "race-orders", 100, "orders each race runs on")
	fs.StringVar(&o.only, "backends", "", "comma-separated backends to run (default: all)")
	fs.StringVar(&o.expiries, "expiry", server.ExpiryDeadlines+","+server.ExpirySweep, "comma-separated expiry mechanisms (SECKILL_EXPIRY) to run")
	fs.StringVar(&o.out, "out", "compare-results/lifecycle.md", "where to write the results; an untracked folder unless -write-docs")
	writeDocs := fs.Bool("write-docs", false, "write the committed docs/lifecycle.md")
	fs.BoolVar(&o.noRaces, "no-races", false, "run the resale only")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, e := range strings.Split(o.expiries, ",") {
		if e != server.ExpiryDeadlines && e != server.ExpirySweep {
			fmt.Fprintf(os.Stderr, "lifecycle: -expiry %q: want %s, %s or both, comma-separated\n", e, server.ExpiryDeadlines, server.ExpirySweep)
			return 2
		}
	}
	if o.window < time.Second || o.units < 10 || o.neverPayPct < 1 || o.neverPayPct > 90 || o.raceOrders < 10 {
		fmt.Fprintln(os.Stderr, "lifecycle: want -pay-window ≥ 1s, -units ≥ 10, -never-pay from 1 to 90, -race-orders ≥ 10")
		return 2
	}
	base, err := server.LoadConfig(labLookup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if base.EmbeddedRedis() || base.EmbeddedSQL() {
		// The instances are processes of their own, and one is killed: the
		// stand-ins live inside a single process.
		fmt.Fprintln(os.Stderr, "lifecycle: needs SECKILL_REDIS_URL and SECKILL_MYSQL_DSN (real Redis and MySQL): its instances are separate processes, and the stand-ins live inside one")
		return 2
	}
	if *writeDocs {
		o.out = "docs/lifecycle.md"
	}
	db, err := mysqlstore.OpenMySQL(context.Background(), base.MySQLDSN, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	var results []lifecycleResult
	for _, b := range labBackends() {
		if o.only != "" && !strings.Contains(","+o.only+",", ","+b.name+",") {
			continue
		}
		for _, expiry := range strings.Split(o.expiries, ",") {
			cfg := base
			b.mutate(&cfg)
			if cfg.Queue == "sync" && expiry == server.ExpiryDeadlines {
				continue // the database reserves: the sweep is all there is
			}
			results = append(results, runLifecycleBackend(cfg, b.name, expiry, db, o))
		}
	}
	if err := writeLifecycle(o, base, results, "seckill-lab lifecycle "+strings.Join(args, " ")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	progressf("lifecycle: wrote %s", o.out)
	return 0
}

func runLifecycleBackend(cfg server.Config, backend, expiry string, db *mysqlstore.Store, o lifecycleOptions) lifecycleResult {
	res := lifecycleResult{Backend: backend, Expiry: expiry}
	l := lifecycleLab{cfg: cfg, expiry: expiry, window: o.window, db: db, tokens: server.NewTokens(cfg.JWTSecret, 0),
		client: &http.Client{Timeout: 10 * time.Second}, paySecret: "lab-pay-" + rand.Text(), vouchers: new([]int64)}
	defer func() { dropVouchers(cfg.MySQLDSN, *l.vouchers...) }()
	tag := backend + ", " + expiry
	run := func(name string, fn func(*labT)) string {
		l.cfg.KeyPrefix = "lab" + rand.Text()[:4] + ":"
		defer dropKeys(cfg.RedisURL, l.cfg.KeyPrefix)
		progressf("[%s] %s…", tag, name)
		return withLabT(fn)
	}
	if note := run("resale", func(t *labT) { res.Resale = l.resale(t, o.units, o.neverPayPct) }); note != "" {
		res.Resale.Note = note
	}
	if r := res.Resale; r.Ran {
		progressf("[%s]   %d expired (deadline → cancelled p50 %v, p99 %v), %d resold (deadline → next sale p50 %v, p99 %v, max %v), %d unsold at the end, %d shoppers, %v",
			tag, r.Expired, round(r.ExpiredP50), round(r.ExpiredP99), r.Resold, round(r.P50), round(r.P99), round(r.Max), r.Unsold, r.Shoppers, round(r.Took))
	} else {
		progressf("[%s]   %s", tag, r.Note)
	}
	if o.noRaces {
		return res
	}
	races := []func(lifecycleLab, *labT, int) raceResult{lifecycleLab.payAtDeadline, lifecycleLab.cancelWhilePaying,
		lifecycleLab.lateNotification, lifecycleLab.killMidExpiry, lifecycleLab.redisLost, lifecycleLab.queuedAtDeadline}
	res.Races = make([]raceResult, len(races))
	for i, race := range races {
		if note := run(lifecycleRaces[i], func(t *labT) { res.Races[i] = race(l, t, o.raceOrders) }); note != "" {
			res.Races[i] = raceResult{Note: note}
		}
		r := res.Races[i]
		switch {
		case !r.Ran:
			progressf("[%s]   %s", tag, r.Note)
		case r.Held:
			progressf("[%s]   held: %d paid, %d cancelled, %d refunded%s", tag, r.Paid, r.Cancelled, r.Refunded, backIn(r))
		default:
			progressf("[%s]   BROKEN: %s (%d paid, %d cancelled, %d refunded%s)", tag, r.Broken, r.Paid, r.Cancelled, r.Refunded, backIn(r))
		}
	}
	return res
}

func backIn(r raceResult) string {
	if r.BackIn == 0 {
		return ""
	}
	return fmt.Sprintf("; every unit back %v after the deadline", round(r.BackIn))
}

// shopperEvery paces the resale's new shoppers.
const shopperEvery = 5 * time.Millisecond

// lifecycleLab is one backend and expiry mechanism, and what its runs
// share.
type lifecycleLab struct {
	cfg       server.Config
	expiry    string
	window    time.Duration
	db        *mysqlstore.Store
	tokens    *server.Tokens
	client    *http.Client
	paySecret string
	vouchers  *[]int64
}

// start starts an instance on redisURL (the lab's Redis when empty), with
// the lifecycle's settings, then extra, and the user's defaults otherwise;
// the run stops it at its end.
func (l lifecycleLab) start(t *labT, redisURL, name string, extra ...string) *labProcess {
	p, err := l.startProcess(redisURL, name, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

// startProcess is start for a goroutine: it returns the error, and the
// stop is its caller's.
func (l lifecycleLab) startProcess(redisURL, name string, extra ...string) (*labProcess, error) {
	cfg := l.cfg
	if redisURL != "" {
		cfg.RedisURL = redisURL
	}
	env := map[string]string{
		"SECKILL_PAY_WINDOW": l.window.String(), "SECKILL_PAY_PROVIDER": "sandbox", "SECKILL_PAY_SECRET": l.paySecret,
		"SECKILL_EXPIRY": l.expiry, "SECKILL_CONSUMER_NAME": name,
		// The defaults users get, not the fault lab's slow drain.
		"SECKILL_BATCH_SIZE": "", "SECKILL_CLAIM_MIN_IDLE": "", "SECKILL_CONSUMERS": "",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return startProcess(cfg, env)
}

func (l lifecycleLab) voucher(t *labT, base string, stock int) int64 {
	v, err := createVoucher(base, l.cfg.AdminToken, int64(stock))
	if err != nil {
		t.Fatal(err)
	}
	*l.vouchers = append(*l.vouchers, v)
	return v
}

func (l lifecycleLab) call(base, method, path string, user int64, body any) (int, map[string]any) {
	var r *bytes.Reader
	if body == nil {
		r = bytes.NewReader(nil)
	} else {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	if user > 0 {
		token, _ := l.tokens.Issue(user, time.Now())
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, nil // an instance killed mid-request
	}
	defer resp.Body.Close()
	out := map[string]any{}
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// buy is shopper user's seckill: the order id, or "" when not accepted.
func (l lifecycleLab) buy(base string, voucher, user int64) string {
	status, body := l.call(base, "POST", "/api/vouchers/"+idString(voucher)+"/seckill", user, nil)
	if status != http.StatusOK {
		return ""
	}
	id, _ := body["orderId"].(string)
	return id
}

// startPayment starts the payment of user's order (a queued order is not
// payable yet: it retries while /pay says so), and returns its id or "".
func (l lifecycleLab) startPayment(base string, user int64, order string, within time.Duration) string {
	deadline := time.Now().Add(within)
	for {
		status, body := l.call(base, "POST", "/api/orders/"+order+"/pay", user, nil)
		if status == http.StatusOK {
			id, _ := body["paymentId"].(string)
			return id
		}
		if time.Now().After(deadline) || (status == http.StatusConflict && body["code"] != "not_payable") {
			return ""
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// complete is the sandbox page's Pay button: the result ("paid",
// "refunded", …) or "" when it was not taken.
func (l lifecycleLab) complete(base, payment string) string {
	status, body := l.call(base, "POST", "/api/payments/sandbox/"+payment+"/complete", 0, map[string]string{"status": "succeeded"})
	if status != http.StatusOK {
		return ""
	}
	res, _ := body["result"].(string)
	return res
}

// pay starts and completes the payment of user's order.
func (l lifecycleLab) pay(base string, user int64, order string) bool {
	p := l.startPayment(base, user, order, 10*time.Second)
	return p != "" && l.complete(base, p) == "paid"
}

// buyAll has shoppers first..first+n-1 buy, spread over the instances, 16
// at a time; orders[i] is shopper first+i's.
func (l lifecycleLab) buyAll(t *labT, bases []string, voucher int64, first int64, n int) []string {
	orders := make([]string, n)
	l.each(n, func(i int) { orders[i] = l.buy(bases[i%len(bases)], voucher, first+int64(i)) })
	for i, o := range orders {
		if o == "" {
			t.Fatalf("shopper %d was not sold a unit of a voucher with stock for all", first+int64(i))
		}
	}
	return orders
}

// each runs fn(0..n-1), 16 at a time.
func (l lifecycleLab) each(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

// count counts the voucher's orders WHERE cond.
func (l lifecycleLab) count(voucher int64, cond string, args ...any) int {
	n, err := l.db.DB().NewSelect().Table("tb_voucher_order").Where("voucher_id = ?", voucher).Where(cond, args...).Count(context.Background())
	if err != nil {
		return -1
	}
	return int(n)
}

func (l lifecycleLab) waitRows(t *labT, voucher int64, n int) {
	if got := waitFor(func() int64 { return int64(l.count(voucher, "1 = 1")) }, int64(n), 30*time.Second); got < int64(n) {
		t.Fatalf("%d of %d orders persisted after 30 s", got, n)
	}
}

// lastDue is the latest deadline of the voucher's orders (now when it has
// none).
func (l lifecycleLab) lastDue(voucher int64) time.Time {
	if due := l.payBys(voucher, "1 = 1"); len(due) > 0 {
		return due[len(due)-1]
	}
	return time.Now()
}

// payBys are the deadlines of the voucher's orders, the latest last.
func (l lifecycleLab) payBys(voucher int64, cond string) []time.Time {
	var out []time.Time
	l.db.DB().NewSelect().Table("tb_voucher_order").Column("pay_by").Where("voucher_id = ?", voucher).Where(cond).
		OrderExpr("pay_by").Scan(context.Background(), &out)
	return out
}

// stocks are the database's stock column, and the stock shoppers are
// shown (Redis's, under a Redis reservation) by base.
func (l lifecycleLab) stocks(base string, voucher int64) (database, shown int64) {
	l.db.DB().NewSelect().Table("tb_seckill_voucher").Column("stock").Where("voucher_id = ?", voucher).Scan(context.Background(), &database)
	shown = -1
	if status, body := l.call(base, "GET", "/api/vouchers/"+idString(voucher), 0, nil); status == http.StatusOK {
		if f, ok := body["stock"].(float64); ok {
			shown = int64(f)
		}
	}
	return database, shown
}

// settled reports whether every deadline of the voucher, the last at due,
// has been acted on and every cancelled unit is back in both stores (stock
// back to initial less the live orders).
func (l lifecycleLab) settled(base string, voucher int64, initial int, due time.Time) bool {
	if time.Now().Before(due) {
		return false
	}
	pending, _ := l.db.DB().NewSelect().Table("tb_order_release").Where("voucher_id = ?", voucher).Count(context.Background())
	if pending > 0 || l.count(voucher, "status = 1 AND pay_by < ?", time.Now()) > 0 {
		return false
	}
	live := int64(l.count(voucher, "status IN (1, 2, 3)"))
	database, shown := l.stocks(base, voucher)
	return database == int64(initial)-live && shown == database
}

// waitSettled waits until due plus within for settled, and returns how
// long after due it came.
func (l lifecycleLab) waitSettled(base string, voucher int64, initial int, due time.Time, within time.Duration) (time.Duration, bool) {
	deadline := due.Add(within)
	for {
		if l.settled(base, voucher, initial, due) {
			return max(time.Since(due), 0), true
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verify checks the invariants of a race once the voucher settled (or
// failed to within 20 s of its last deadline): every order paid, cancelled
// or refunded; the database's stock the initial less the paid; Redis's
// equal to it; and, counted by the instances still running (returned,
// when every instance that ran is), no unit given back twice.
func (l lifecycleLab) verify(r *raceResult, base string, voucher int64, initial int, returned []*labProcess) {
	_, ok := l.waitSettled(base, voucher, initial, l.lastDue(voucher), 20*time.Second)
	r.Paid = l.count(voucher, "status IN (2, 3)")
	r.Cancelled = l.count(voucher, "status = 4")
	r.Refunded = l.count(voucher, "status IN (5, 6)")
	database, shown := l.stocks(base, voucher)
	unpaid := l.count(voucher, "status = 1")
	switch {
	case unpaid > 0:
		r.Broken = fmt.Sprintf("%d orders still unpaid 20 s after their deadline", unpaid)
	case r.Paid+r.Cancelled+r.Refunded < r.Orders:
		r.Broken = fmt.Sprintf("%d of %d accepted orders never reached the database: their units stay held until a reconcile",
			r.Orders-r.Paid-r.Cancelled-r.Refunded, r.Orders)
	case r.Paid+r.Cancelled+r.Refunded > r.Orders:
		r.Broken = fmt.Sprintf("%d orders in the database, want %d", r.Paid+r.Cancelled+r.Refunded, r.Orders)
	case database != int64(initial-r.Paid):
		r.Broken = fmt.Sprintf("database stock %d, want %d (initial %d less %d paid)", database, initial-r.Paid, initial, r.Paid)
	case shown != database:
		r.Broken = fmt.Sprintf("stock shown %d, database %d", shown, database)
	case !ok:
		r.Broken = "a release still pending after 20 s"
	}
	if r.Broken == "" && returned != nil && l.cfg.Queue != "sync" {
		var units float64
		for _, p := range returned {
			units += metricValue(p, "seckill_units_returned_total")
		}
		if int(units) != r.Cancelled+r.Refunded {
			r.Broken = fmt.Sprintf("%v units given back to Redis for %d cancelled orders", units, r.Cancelled+r.Refunded)
		}
	}
	r.Held = r.Broken == ""
}
