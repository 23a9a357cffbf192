package lab

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv/faultproxy"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/app/server"
)

// Redis faults mid-sale: a sale of limited stock runs against a server
// process on a Redis of the lab's own, and Redis forgets or moves while
// shoppers buy. What the table measures is what a shopper was told against
// what MySQL ends up with.

// redisFaults are the columns of the Redis-fault table, then (from
// firstOutageFault on) of the table of outages and memory pressure.
var redisFaults = []string{
	"Redis restarted empty",
	"Redis restarted from an older snapshot",
	"Sentinel failover, replication held back",
	"same, with SECKILL_REDIS_WAIT_REPLICAS=1",
	"Redis unreachable 5 s, no reset",
	"MySQL unreachable 5 s, no reset",
	"Redis full, noeviction",
	"Redis full, allkeys-lru",
	"Redis full, allkeys-random",
	"Redis full, volatile-lru",
	"Redis squeezed 5 s, allkeys-lru",
}

// firstOutageFault is the first column of the second table.
const firstOutageFault = 4

// outageFor is how long the outages last.
const outageFor = 5 * time.Second

// saleFaultResult is what one Redis fault cost a sale.
type saleFaultResult struct {
	Ran   bool
	Note  string // why it did not run, or what went wrong
	Stock int64
	// Accepted: distinct orders answered 200.
	Accepted int64
	// Lost: answered 200, never in MySQL.
	Lost int64
	// Twice: shoppers answered 200 with two different orders.
	Twice int64
	// Oversold: rows in MySQL beyond the stock.
	Oversold int64
	// Unconfirmed: answered 503 unconfirmed (the WAIT mode), and how many
	// of those orders MySQL has anyway.
	Unconfirmed, UnconfirmedKept int64
	// Correct: from the fault to the first order accepted after it; 0
	// when none was.
	Correct time.Duration
	// Unavailable: answered 503 (busy, unavailable); Unanswered: no
	// answer within the shoppers' 10 s; Slowest: the longest answer.
	Unavailable, Unanswered int64
	Slowest                 time.Duration
	// Evicted: keys Redis evicted during the sale (evicted_keys).
	Evicted int64
	// Stopped: the longest time after the fault with no order accepted,
	// up to the last one accepted (a sale that stops and comes back).
	Stopped time.Duration
}

const (
	saleFaultStock    = 4000
	saleFaultShoppers = 12000
	// saleFaultRate paces the shoppers (requests per second), so the sale
	// lasts long enough for the fault to strike mid-way and the sale to go
	// on after it; the consumer, behind the delaying MySQL proxy, drains
	// slower than this, so orders wait in the queue when Redis goes.
	saleFaultRate  = 1500
	saleFaultConns = 32
)

// runRedisFaults runs each Redis fault on cfg's backend.
func (f faultLab) runRedisFaults() []saleFaultResult {
	out := make([]saleFaultResult, len(redisFaults))
	full := func(policy string) func(faultLab, *labT) saleFaultResult {
		return func(f faultLab, t *labT) saleFaultResult { return f.redisFull(t, policy) }
	}
	steps := []func(faultLab, *labT) saleFaultResult{
		faultLab.restartEmpty, faultLab.restartFromSnapshot,
		func(f faultLab, t *labT) saleFaultResult { return f.failover(t, false) },
		func(f faultLab, t *labT) saleFaultResult { return f.failover(t, true) },
		faultLab.redisUnreachable, faultLab.mysqlUnreachable,
		full("noeviction"), full("allkeys-lru"), full("allkeys-random"), full("volatile-lru"),
		func(f faultLab, t *labT) saleFaultResult { return f.redisSqueezed(t, "allkeys-lru") },
	}
	for i, step := range steps {
		if f.cfg.Queue == "sync" && i != firstOutageFault && i != firstOutageFault+1 {
			out[i].Note = "n/a: no Redis in the order path"
			continue
		}
		f.progress("[%s] Redis fault mid-sale: %s…", f.cfg.Queue, redisFaults[i])
		// A key prefix of its own: an outside broker's queue is named from
		// it, and a backlog one fault left in a shared queue would delay
		// the next fault's orders past its settle.
		f.cfg.KeyPrefix = "lab" + rand.Text()[:4] + ":"
		if note := withLabT(func(t *labT) { out[i] = step(f, t) }); note != "" {
			out[i] = saleFaultResult{Note: note}
		}
		if r := out[i]; r.Ran {
			f.progress("[%s]   accepted %d of %d; lost %d, twice %d, oversold %d, unconfirmed %d (%d persisted anyway); an order accepted %v after the fault; %d × 503, %d unanswered, slowest %v, stopped %v, %d keys evicted",
				f.cfg.Queue, r.Accepted, r.Stock, r.Lost, r.Twice, r.Oversold, r.Unconfirmed, r.UnconfirmedKept, round(r.Correct),
				r.Unavailable, r.Unanswered, round(r.Slowest), round(r.Stopped), r.Evicted)
		} else {
			f.progress("[%s]   %s", f.cfg.Queue, r.Note)
		}
	}
	return out
}

func (f faultLab) restartEmpty(t *labT) saleFaultResult {
	rp := redistopology.StartRedisProcess(t)
	return f.saleUnderFault(t, rp.URL(), nil, func(s *faultedSale) {
		s.waitAccepted(saleFaultStock / 4)
		s.strikeNow()
		rp.RestartEmpty()
	})
}

func (f faultLab) restartFromSnapshot(t *labT) saleFaultResult {
	rp := redistopology.StartRedisProcess(t)
	return f.saleUnderFault(t, rp.URL(), nil, func(s *faultedSale) {
		s.waitAccepted(saleFaultStock / 8)
		rp.Snapshot()
		s.waitAccepted(saleFaultStock / 4)
		s.strikeNow()
		rp.RestartFromSnapshot()
	})
}

// failover holds the replication stream back, then kills the primary: the
// sentinels promote a replica that never had the last writes. Two
// replicas, so that the promoted one still has one to confirm the WAIT
// mode's writes.
func (f faultLab) failover(t *labT, wait bool) saleFaultResult {
	set := redistopology.StartSentinelSetWith(t, redistopology.SentinelOptions{Replicas: 2, BehindProxy: true})
	env := map[string]string{}
	if wait {
		env["SECKILL_REDIS_WAIT_REPLICAS"] = "1"
	}
	return f.saleUnderFault(t, set.URL(), env, func(s *faultedSale) {
		s.waitAccepted(saleFaultStock / 5)
		set.FreezeReplication()
		time.Sleep(time.Second)
		old := set.KillPrimaryNow()
		s.strikeNow() // after the kill: nothing sent later can reach the old primary
		set.WaitPromoted(old)
	})
}

// redisUnreachable puts a proxy that swallows every byte between the
// server and Redis for outageFor, connections left open (a partition, not
// a restart), then resets them.
func (f faultLab) redisUnreachable(t *labT) saleFaultResult {
	rp := redistopology.StartRedisProcess(t)
	px, err := faultproxy.Start("127.0.0.1:"+strconv.Itoa(rp.Port), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	return f.saleUnderFault(t, "redis://"+px.Addr()+"/0", nil, func(s *faultedSale) {
		s.waitAccepted(saleFaultStock / 4)
		s.strikeNow()
		px.Blackhole(outageFor)
	})
}

// mysqlUnreachable does the same between the server and MySQL (the
// delaying proxy every fault process reaches MySQL through).
func (f faultLab) mysqlUnreachable(t *labT) saleFaultResult {
	rp := redistopology.StartRedisProcess(t)
	return f.saleUnderFault(t, rp.URL(), nil, func(s *faultedSale) {
		s.waitAccepted(saleFaultStock / 4)
		s.strikeNow()
		f.proxy.Blackhole(outageFor)
	})
}

// redisSqueezed caps the memory of a Redis whose maxmemory-policy is
// policy as redisFull does, for outageFor, then lifts the cap: what the
// squeeze costs is how long the sale stops (evictions, rebuilds) and how
// soon it sells again once memory is back.
func (f faultLab) redisSqueezed(t *labT, policy string) saleFaultResult {
	return f.squeeze(t, policy, outageFor)
}

// redisFull runs the sale on a Redis whose maxmemory-policy is policy (the
// server started with SECKILL_REDIS_ALLOW_EVICTION=1), and at a quarter of
// the stock caps its memory just above what it uses: the rest of the sale
// writes past the cap. noeviction refuses those writes; the others evict
// keys — the sale's own, for all the keys Redis holds are the sale's.
func (f faultLab) redisFull(t *labT, policy string) saleFaultResult {
	return f.squeeze(t, policy, 0)
}

// squeeze is redisFull with the cap lifted after lasting (0: kept).
func (f faultLab) squeeze(t *labT, policy string, lasting time.Duration) saleFaultResult {
	rp := redistopology.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(rp.Port)})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
		t.Fatal(err)
	}
	evicted := func() int64 {
		n, _ := strconv.ParseInt(infoValue(rdb.Info(ctx, "stats").Val(), "evicted_keys"), 10, 64)
		return n
	}
	before := int64(-1)
	r := f.saleUnderFault(t, rp.URL(), map[string]string{"SECKILL_REDIS_ALLOW_EVICTION": "1"}, func(s *faultedSale) {
		s.waitAccepted(saleFaultStock / 4)
		used, _ := strconv.ParseInt(infoValue(rdb.Info(ctx, "memory").Val(), "used_memory"), 10, 64)
		before = evicted()
		s.strikeNow()
		if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+256<<10, 10)).Err(); err != nil {
			panic(labAbort{"CONFIG SET maxmemory: " + err.Error()})
		}
		if lasting > 0 {
			time.Sleep(lasting)
			if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				panic(labAbort{"CONFIG SET maxmemory 0: " + err.Error()})
			}
		}
	})
	if before >= 0 {
		r.Evicted = evicted() - before
	}
	return r
}

func infoValue(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// saleUnderFault runs the sale against a server process on redisURL,
// strike running beside it (it calls strikeNow as the fault strikes).
func (f faultLab) saleUnderFault(t *labT, redisURL string, env map[string]string, strike func(*faultedSale)) saleFaultResult {
	cfg := f.cfg
	cfg.RedisURL = redisURL
	p, err := startProcess(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	voucher, err := createVoucher(p.base, cfg.AdminToken, saleFaultStock)
	if err != nil {
		t.Fatal(err)
	}
	*f.vouchers = append(*f.vouchers, voucher)

	s := &faultedSale{orders: map[int64]int64{}, wins: map[int64]map[int64]bool{}, unconfirmed: map[int64]bool{}}
	var abort atomic.Value // a fault's own failure, from its goroutine
	struck := make(chan struct{})
	go func() {
		defer close(struck)
		defer func() {
			if p := recover(); p != nil {
				a, ok := p.(labAbort)
				if !ok {
					a = labAbort{fmt.Sprint(p)}
				}
				abort.Store(a.msg)
			}
		}()
		strike(s)
	}()
	s.run(p.base+"/api/vouchers/"+idString(voucher)+"/seckill", f.tokens)
	s.done.Store(true)
	<-struck
	if msg, _ := abort.Load().(string); msg != "" {
		t.Fatal("the fault: " + msg)
	}
	if s.struckAt.IsZero() {
		t.Fatal("the sale ended before the fault struck")
	}

	r := saleFaultResult{Ran: true, Stock: saleFaultStock, Accepted: int64(len(s.orders)), Unconfirmed: int64(len(s.unconfirmed)),
		Unavailable: s.unavailable, Unanswered: s.unanswered, Slowest: s.slowest, Stopped: s.longestStop}
	if !s.firstAfter.IsZero() {
		r.Correct = s.firstAfter.Sub(s.struckAt)
	}
	persisted, err := f.settleAccepted(p, voucher, s.orders, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for id := range s.orders {
		if !persisted[id] {
			r.Lost++
		}
	}
	for id := range s.unconfirmed {
		if persisted[id] {
			r.UnconfirmedKept++
		}
	}
	for _, ids := range s.wins {
		if len(ids) > 1 {
			r.Twice++
		}
	}
	r.Oversold = max(int64(len(persisted))-saleFaultStock, 0)
	return r
}

func (f faultLab) orderIDs(voucher int64) (map[int64]bool, error) {
	var ids []int64
	err := f.db.DB().NewSelect().Table("tb_voucher_order").Column("id").Where("voucher_id = ?", voucher).
		Scan(context.Background(), &ids)
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, err
}

// faultedSale is the shoppers' side of a sale a fault strikes: what each
// was told.
type faultedSale struct {
	accepted    atomic.Int64
	done        atomic.Bool
	mu          sync.Mutex
	orders      map[int64]int64          // answered 200: order id → shopper
	wins        map[int64]map[int64]bool // shopper → order ids answered 200
	unconfirmed map[int64]bool           // order ids answered 503 unconfirmed
	struckAt    time.Time                // set by strikeNow
	firstAfter  time.Time                // answer to the first request sent after the fault that was accepted
	unavailable int64                    // answered 503
	unanswered  int64                    // no answer within the client's timeout
	slowest     time.Duration            // the longest answer
	lastAccept  time.Time                // the latest new order answered 200 (from the fault on)
	longestStop time.Duration            // the longest time with none, after the fault
}

// strikeNow records the moment the fault strikes.
func (s *faultedSale) strikeNow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.struckAt = time.Now()
	s.lastAccept = s.struckAt
}

// waitAccepted blocks until n orders were accepted or the sale ended.
func (s *faultedSale) waitAccepted(n int64) {
	for s.accepted.Load() < n && !s.done.Load() {
		time.Sleep(5 * time.Millisecond)
	}
}

// run sends the shoppers at saleFaultRate: shopper u for u = 1…, and,
// after every fourth of them past the first thousand, shopper u−1000 again
// (a retry about two-thirds of a second later, often across the fault).
func (s *faultedSale) run(url string, tokens *server.Tokens) {
	var attempts []int64
	for u := int64(1); u <= saleFaultShoppers; u++ {
		attempts = append(attempts, u)
		if u > 1000 && u%4 == 0 {
			attempts = append(attempts, u-1000)
		}
	}
	work := make(chan int64)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: saleFaultConns}}
	var wg sync.WaitGroup
	for range saleFaultConns {
		wg.Go(func() {
			for u := range work {
				s.attempt(client, url, tokens, u)
			}
		})
	}
	start := time.Now()
	for i, u := range attempts {
		if wait := time.Until(start.Add(time.Duration(i) * time.Second / saleFaultRate)); wait > 0 {
			time.Sleep(wait)
		}
		work <- u
	}
	close(work)
	wg.Wait()
}

func (s *faultedSale) attempt(client *http.Client, url string, tokens *server.Tokens, user int64) {
	sent := time.Now()
	tok, _ := tokens.Issue(user, sent)
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil {
		s.mu.Lock()
		s.unanswered++
		s.mu.Unlock()
		return
	}
	defer resp.Body.Close()
	var body struct {
		OrderID string `json:"orderId"`
		Error   struct {
			Code    string `json:"code"`
			OrderID string `json:"orderId"`
		} `json:"error"`
	}
	decodeJSON(resp, &body)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slowest = max(s.slowest, now.Sub(sent))
	if resp.StatusCode == http.StatusServiceUnavailable {
		s.unavailable++
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		id, err := strconv.ParseInt(body.OrderID, 10, 64)
		if err != nil {
			return
		}
		if _, seen := s.orders[id]; !seen {
			s.accepted.Add(1)
			if !s.struckAt.IsZero() {
				s.longestStop = max(s.longestStop, now.Sub(s.lastAccept))
				s.lastAccept = now
			}
		}
		s.orders[id] = user
		if s.wins[user] == nil {
			s.wins[user] = map[int64]bool{}
		}
		s.wins[user][id] = true
		if !s.struckAt.IsZero() && sent.After(s.struckAt) && s.firstAfter.IsZero() {
			s.firstAfter = now
		}
	case body.Error.Code == "unconfirmed":
		if id, err := strconv.ParseInt(body.Error.OrderID, 10, 64); err == nil {
			s.unconfirmed[id] = true
		}
	}
}

// labT gives the Redis topologies what they need of a test's testing.TB:
// a failure aborts the one fault (a panic that withLabT recovers), and the
// cleanups run after it.
type labT struct{ cleanups []func() }

type labAbort struct{ msg string }

func (t *labT) Helper()                           {}
func (t *labT) Fatal(args ...any)                 { panic(labAbort{fmt.Sprint(args...)}) }
func (t *labT) Fatalf(format string, args ...any) { panic(labAbort{fmt.Sprintf(format, args...)}) }
func (t *labT) Skip(args ...any)                  { panic(labAbort{"not run: " + fmt.Sprint(args...)}) }
func (t *labT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }

func (t *labT) TempDir() string {
	dir, err := os.MkdirTemp("", "seckill-lab-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// withLabT runs fn with a labT and then its cleanups, last first; a
// failure or skip inside fn ends it and comes back as the note.
func withLabT(fn func(*labT)) (note string) {
	t := &labT{}
	defer func() {
		for i := len(t.cleanups) - 1; i >= 0; i-- {
			t.cleanups[i]()
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			a, ok := p.(labAbort)
			if !ok {
				panic(p)
			}
			note = a.msg
		}
	}()
	fn(t)
	return ""
}
