package lab

import (
	"crypto/rand"

	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/testenv/faultproxy"
	"github.com/seckill-lab/seckill/app/server"
)

// faultResult is what one injected fault cost a backend.
type faultResult struct {
	Ran         bool
	Note        string // why it did not run, or what went wrong
	Accepted    int64  // orders accepted before and during the fault
	Lost        int64  // accepted, never persisted
	Redelivered int64  // delivered again and found already persisted (absorbed)
	// StockOff is stock taken in the database minus rows: non-zero means
	// an order's stock was taken twice (or not at all).
	StockOff int64
	// Resumed: from the end of the fault to the next persisted order; 0
	// when none came.
	Resumed time.Duration
	// StruckAt: orders already persisted when the fault struck.
	StruckAt int64
}

// labFaults are the faults, in the order of the results table.
var labFaults = []string{"consumer process SIGKILLed mid-drain, restarted",
	"MySQL unreachable 10 s mid-drain", "consumers offline while orders are published",
	"Redis SIGKILLed mid-drain, restarted from its AOF (everysec)",
	"relay SIGKILLed mid-batch (outside brokers), restarted",
	"broker SIGKILLed mid-drain, restarted (outside brokers)"}

const faultBacklog = 6000

// runFaults injects each fault against separate server processes: the
// consumer and MySQL faults, then the Redis faults mid-sale.
func runFaults(cfg server.Config, conns int, redisOnly bool, progress func(string, ...any)) ([]faultResult, []saleFaultResult, historyResult) {
	out := make([]faultResult, len(labFaults))
	sales := make([]saleFaultResult, len(redisFaults))
	notRun := func(note string) ([]faultResult, []saleFaultResult, historyResult) {
		for i := range out {
			out[i].Note = note
		}
		for i := range sales {
			sales[i].Note = note
		}
		return out, sales, historyResult{Note: note}
	}
	switch {
	case cfg.EmbeddedRedis() || cfg.EmbeddedSQL():
		return notRun("not run: needs SECKILL_REDIS_URL and SECKILL_MYSQL_DSN (the stand-ins live inside one process)")
	case cfg.Queue == "sync":
		// The outages of the sale-fault table still apply (MySQL is the
		// order path, Redis gives the ids): runRedisFaults picks them.
		for i := range out {
			out[i].Note = "n/a: no queue, no consumer"
		}
		redisOnly = true
	}
	f, closeLab, err := newFaultLab(cfg, conns, progress)
	if err != nil {
		return notRun(err.Error())
	}
	defer closeLab()
	// Method expressions, not method values: a method value would copy f
	// now, and every step would run on the key prefix of the first.
	steps := []func(faultLab) faultResult{faultLab.killConsumer, faultLab.mysqlOutage, faultLab.offlineConsumers, faultLab.redisRestart,
		faultLab.killRelay, faultLab.brokerRestart}
	for i, step := range steps {
		if redisOnly {
			if out[i].Note == "" {
				out[i].Note = "not run (-redis-faults-only)"
			}
			continue
		}
		f.cfg.KeyPrefix = "lab" + rand.Text()[:4] + ":"
		progress("[%s] fault: %s…", cfg.Queue, labFaults[i])
		out[i] = step(f)
		dropKeys(f.cfg.RedisURL, f.cfg.KeyPrefix)
		if out[i].Ran {
			progress("[%s]   struck at %d of %d persisted; lost %d, redelivered %d, stock off by %d, resumed after %v",
				cfg.Queue, out[i].StruckAt, out[i].Accepted, out[i].Lost, out[i].Redelivered, out[i].StockOff, round(out[i].Resumed))
		} else {
			progress("[%s]   %s", cfg.Queue, out[i].Note)
		}
	}
	// The Redis faults run on Redis servers of their own: the user's is
	// not restarted or failed over.
	f.cfg.KeyPrefix = "lab" + rand.Text()[:4] + ":"
	sales = f.runRedisFaults()
	return out, sales, f.runHistory()
}

// newFaultLab opens what the faults need on cfg's real servers: the
// database to count rows in, and the delaying proxy the processes reach
// MySQL through (so the consumer drains slower than shoppers buy, and
// every fault strikes with orders still waiting). close drops the
// vouchers the faults opened and closes both.
func newFaultLab(cfg server.Config, conns int, progress func(string, ...any)) (faultLab, func(), error) {
	db, err := mysqlstore.OpenMySQL(context.Background(), cfg.MySQLDSN, 0)
	if err != nil {
		return faultLab{}, nil, err
	}
	f := faultLab{cfg: cfg, conns: conns, db: db, tokens: server.NewTokens(cfg.JWTSecret, 0), progress: progress, vouchers: new([]int64)}
	dsn, err := mysql.ParseDSN(cfg.MySQLDSN)
	if err == nil {
		f.proxy, err = faultproxy.Start(dsn.Addr, faultDBDelay)
	}
	if err != nil {
		db.Close()
		return faultLab{}, nil, err
	}
	dsn.Addr = f.proxy.Addr()
	f.cfg.MySQLDSN = dsn.FormatDSN()
	return f, func() {
		dropVouchers(cfg.MySQLDSN, *f.vouchers...)
		f.proxy.Close()
		db.Close()
	}, nil
}

// faultDBDelay slows each request of the fault processes to MySQL.
const faultDBDelay = 3 * time.Millisecond

type faultLab struct {
	proxy *faultproxy.Proxy
	// vouchers are those the faults opened, dropped at the end.
	vouchers *[]int64
	cfg      server.Config
	conns    int
	db       *mysqlstore.Store
	tokens   *server.Tokens
	progress func(string, ...any)
}

func (f faultLab) rows(voucher int64) int64 {
	n, err := f.db.DB().NewSelect().Table("tb_voucher_order").Where("voucher_id = ?", voucher).Count(context.Background())
	if err != nil {
		return -1
	}
	return int64(n)
}

func (f faultLab) stockTaken(voucher, initial int64) int64 {
	v, err := f.db.FindVoucher(context.Background(), voucher)
	if err != nil {
		return -1
	}
	return initial - v.Stock
}

// backlog opens a voucher on p and has it accept faultBacklog orders.
func (f faultLab) backlog(p *labProcess) (voucher, accepted int64, err error) {
	voucher, err = createVoucher(p.base, f.cfg.AdminToken, faultStock)
	if err != nil {
		return 0, 0, err
	}
	*f.vouchers = append(*f.vouchers, voucher)
	load := runLoad(context.Background(), f.conns, 2*time.Minute, faultBacklog, buyRequests(p.base, f.tokens, []int64{voucher}, 1, faultBacklog))
	return voucher, load.Status[http.StatusOK], nil
}

const faultStock = 1_000_000_000

// strike waits until a quarter of the accepted orders are persisted and
// returns the count at that moment: the fault strikes then.
func (f faultLab) strike(voucher, accepted int64) int64 {
	return f.waitAtLeast(voucher, accepted/4, 30*time.Second)
}

// waitAtLeast polls until the voucher has n rows or within passes.
func (f faultLab) waitAtLeast(voucher, n int64, within time.Duration) int64 {
	return waitFor(func() int64 { return f.rows(voucher) }, n, within)
}

// settle waits until want rows exist, or the count stops moving for 5s,
// or max passes; it returns the count.
func (f faultLab) settle(voucher, want int64, max time.Duration) int64 {
	return f.settleWhile(voucher, want, max, func() bool { return false })
}

// settleAccepted waits until every order in accepted is in MySQL, or
// nothing new is stored for 5 s while p's queue is empty, or max passes,
// and returns the voucher's stored order ids. By ids, not a row count: a
// sale whose shoppers were answered 503 unconfirmed may store those
// orders too, and their rows would make up the count while orders
// answered 200 still wait in the queue (the lab's MySQL is behind a
// delaying proxy, so a backlog drains slowly).
func (f faultLab) settleAccepted(p *labProcess, voucher int64, accepted map[int64]int64, max time.Duration) (map[int64]bool, error) {
	deadline := time.Now().Add(max)
	missing := func(stored map[int64]bool) int {
		n := 0
		for id := range accepted {
			if !stored[id] {
				n++
			}
		}
		return n
	}
	stored, err := f.orderIDs(voucher)
	if err != nil {
		return nil, err
	}
	last, since := missing(stored), time.Now()
	for last > 0 && time.Now().Before(deadline) &&
		(time.Since(since) < 5*time.Second || metricValue(p, "seckill_queue_depth{") > 0) {
		time.Sleep(250 * time.Millisecond)
		if stored, err = f.orderIDs(voucher); err != nil {
			return nil, err
		}
		if n := missing(stored); n != last {
			last, since = n, time.Now()
		}
	}
	return stored, nil
}

func (f faultLab) settleWhile(voucher, want int64, max time.Duration, busy func() bool) int64 {
	deadline := time.Now().Add(max)
	last, since := f.rows(voucher), time.Now()
	for time.Now().Before(deadline) && last < want && (time.Since(since) < 5*time.Second || busy()) {
		time.Sleep(100 * time.Millisecond)
		if n := f.rows(voucher); n != last {
			last, since = n, time.Now()
		}
	}
	return last
}

// recover measures the aftermath of a fault that ended at `since`: the
// time to the next persisted order, then, once the count settles, what was
// lost, what p saw redelivered, and whether the stock matches the rows.
func (f faultLab) recover(p *labProcess, voucher, accepted, struckAt int64, since time.Time) faultResult {
	r := faultResult{Ran: true, Accepted: accepted, StruckAt: struckAt}
	before := f.rows(voucher)
	if f.waitAtLeast(voucher, before+1, 30*time.Second) > before {
		r.Resumed = time.Since(since)
	}
	rows := f.settle(voucher, accepted, 90*time.Second)
	r.Redelivered = int64(metricValue(p, "seckill_orders_duplicate_total"))
	r.Lost = accepted - rows
	r.StockOff = f.stockTaken(voucher, faultStock) - rows
	return r
}

func (f faultLab) killConsumer() faultResult {
	p1, err := startProcess(f.cfg, nil)
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	voucher, accepted, err := f.backlog(p1)
	if err != nil {
		p1.kill()
		return faultResult{Note: err.Error()}
	}
	struck := f.strike(voucher, accepted)
	p1.kill()
	killedAt := time.Now()
	p2, err := startProcess(f.cfg, nil)
	if err != nil {
		return faultResult{Note: "restart: " + err.Error()}
	}
	defer p2.stop()
	return f.recover(p2, voucher, accepted, struck, killedAt)
}

func (f faultLab) mysqlOutage() faultResult {
	p, err := startProcess(f.cfg, nil)
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	defer p.stop()
	voucher, accepted, err := f.backlog(p)
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	struck := f.strike(voucher, accepted)
	f.proxy.SetDown(true)
	time.Sleep(10 * time.Second)
	f.proxy.SetDown(false)
	return f.recover(p, voucher, accepted, struck, time.Now())
}

func (f faultLab) offlineConsumers() faultResult {
	if f.cfg.Queue == "memory" {
		return faultResult{Note: "n/a: the queue lives in the process; with no consumer there it is the same process"}
	}
	api, err := startProcess(f.cfg, map[string]string{"SECKILL_CONSUMERS": "0"})
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	voucher, accepted, err := f.backlog(api)
	api.stop()
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	before := f.rows(voucher) // nothing consumed while no consumer ran
	started := time.Now()
	consumer, err := startProcess(f.cfg, nil)
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	defer consumer.stop()
	return f.recover(consumer, voucher, accepted, before, started)
}

func (f faultLab) redisRestart() faultResult {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return faultResult{Note: "not run: no redis-server binary on this machine"}
	}
	dir, err := os.MkdirTemp("", "seckill-lab-redis-")
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	defer os.RemoveAll(dir)
	addr, err := freeAddr()
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	_, port, _ := net.SplitHostPort(addr)
	start := func() (*exec.Cmd, error) {
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "",
			"--appendonly", "yes", "--appendfsync", "everysec", "--logfile", filepath.Join(dir, "redis.log"))
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		for i := 0; i < 100; i++ {
			if c.Ping(context.Background()).Err() == nil {
				return cmd, nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("redis-server on %s did not start", addr)
	}
	rs, err := start()
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	cfg := f.cfg
	cfg.RedisURL = "redis://" + addr + "/0"
	p, err := startProcess(cfg, nil)
	if err != nil {
		rs.Process.Kill()
		rs.Wait()
		return faultResult{Note: err.Error()}
	}
	defer p.stop()
	voucher, accepted, err := f.backlog(p)
	if err != nil {
		rs.Process.Kill()
		rs.Wait()
		return faultResult{Note: err.Error()}
	}
	struck := f.strike(voucher, accepted)
	rs.Process.Kill() // SIGKILL: the AOF keeps what was fsynced
	rs.Wait()
	if rs, err = start(); err != nil {
		return faultResult{Note: "restart: " + err.Error()}
	}
	defer func() { rs.Process.Kill(); rs.Wait() }()
	return f.recover(p, voucher, accepted, struck, time.Now())
}
