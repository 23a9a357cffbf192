package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// harness is one running server, on the embedded stand-ins or on the real
// Redis and MySQL, with an HTTP client pointed at it.
type harness struct {
	t      testing.TB
	cfg    Config
	srv    *Server
	base   string
	client *http.Client
	tokens *Tokens
	stop   context.CancelFunc
	done   chan error
	// requestQueries counts the statements requests run (not the
	// server's own duties), installed before the server serves.
	requestQueries *queryCounter

	stopOnce sync.Once
}

// forEachStack runs fn against a server on the embedded stand-ins and one on
// the real services (skipped outside CI when they are not configured).
func forEachStack(t *testing.T, mutate func(*Config), fn func(t *testing.T, h *harness)) {
	t.Helper()
	for _, stack := range []string{"embedded", "real"} {
		t.Run(stack, func(t *testing.T) {
			fn(t, startServer(t, stack, mutate))
		})
	}
}

// forEachBackendAndStack runs fn for every built-in backend and variant
// on both stacks. Not Backends(): a test that registers a backend of its
// own would otherwise add it to every test that runs after it.
func forEachBackendAndStack(t *testing.T, fn func(t *testing.T, h *harness)) {
	t.Helper()
	forEachBackendOn(t, []string{"embedded", "real"}, fn)
}

// forEachBackendOn runs fn for every built-in backend and variant on each
// of stacks: "embedded", "real" (one Redis, MySQL) or "cluster" (the test
// Redis Cluster, MySQL).
func forEachBackendOn(t *testing.T, stacks []string, fn func(t *testing.T, h *harness)) {
	t.Helper()
	forEachBackendOnWith(t, stacks, nil, fn)
}

// forEachBackendOnWith is forEachBackendOn with settings of the test's own
// (extra, if set, runs after the backend is chosen).
func forEachBackendOnWith(t *testing.T, stacks []string, extra func(*Config), fn func(t *testing.T, h *harness)) {
	t.Helper()
	run := func(t *testing.T, mutate func(*Config)) {
		for _, stack := range stacks {
			t.Run(stack, func(t *testing.T) {
				fn(t, startServer(t, stack, func(c *Config) {
					mutate(c)
					if extra != nil {
						extra(c)
					}
				}))
			})
		}
	}
	for _, b := range builtinBackends {
		t.Run(b.Name, func(t *testing.T) { run(t, func(c *Config) { c.Queue = b.Name }) })
		for _, v := range b.Variants {
			t.Run(v.Name, func(t *testing.T) { run(t, func(c *Config) { c.Queue = b.Name; v.Configure(c) }) })
		}
	}
}

func idString(v int64) string { return strconv.FormatInt(v, 10) }

// testConfig is the production configuration, read by LoadConfig from an
// environment that sets only what a test needs: the defaults are the ones a
// user gets, and cannot drift from them. Rate limits are off (tests that
// hold them turn them on).
func testConfig() Config {
	cfg, err := LoadConfig(env(map[string]string{
		"SECKILL_ADDR":         "127.0.0.1:0",
		"SECKILL_JWT_SECRET":   testenv.Secret(), // as real servers take them
		"SECKILL_ADMIN_TOKEN":  testenv.Secret(),
		"SECKILL_KEY_PREFIX":   "t" + testenv.RandomSuffix() + ":",
		"SECKILL_SECKILL_RATE": "0",
		"SECKILL_CODE_RATE":    "0",
		"SECKILL_MISS_RATE":    "0",
		"SECKILL_DEMO_SALE":    "0",
	}))
	if err != nil {
		panic(err)
	}
	return cfg
}

// useRealServers points cfg at the real Redis and a fresh database of the
// real MySQL (skipped outside CI when they are not configured).
func useRealServers(t testing.TB, cfg *Config) {
	t.Helper()
	r, ok := testenv.RealRedis(t)
	if !ok {
		t.Skipf("%s is not set: real stack not tested (CI sets it)", testenv.RedisURLEnv)
	}
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set: real stack not tested (CI sets it)", testenv.MySQLDSNEnv)
	}
	cfg.RedisURL, cfg.MySQLDSN, cfg.KeyPrefix = os.Getenv(testenv.RedisURLEnv), dsn, r.Prefix
	*cfg = cfg.MustWith(string(natsURL), os.Getenv(testenv.NATSURLEnv))
}

func startServer(t testing.TB, stack string, mutate func(*Config)) *harness {
	t.Helper()
	return startServerWith(t, stack, mutate, nil)
}

// startServerWith is startServer with a hook that may change the built
// server before it serves (to wrap its store, say).
func startServerWith(t testing.TB, stack string, mutate func(*Config), beforeServe func(*Server)) *harness {
	t.Helper()
	return startServerOpts(t, stack, mutate, nil, beforeServe)
}

// startServerOpts is startServerWith with New's options.
func startServerOpts(t testing.TB, stack string, mutate func(*Config), opts []Option, beforeServe func(*Server)) *harness {
	t.Helper()
	cfg := testConfig()
	if stack == "real" {
		useRealServers(t, &cfg)
	}
	if stack == "cluster" {
		cfg, _ = clusterConfig(t, cfg.Queue)
	}
	if mutate != nil {
		mutate(&cfg)
	}
	useTestBrokers(t, &cfg)
	return startWithOpts(t, cfg, opts, beforeServe)
}

func startWith(t testing.TB, cfg Config, beforeServe ...func(*Server)) *harness {
	t.Helper()
	return startWithOpts(t, cfg, nil, beforeServe...)
}

// startWithOpts is startWith with New's options.
func startWithOpts(t testing.TB, cfg Config, opts []Option, beforeServe ...func(*Server)) *harness {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg, log, opts...)
	if err != nil {
		cancel()
		t.Fatalf("build: %v", err)
	}
	queries := &queryCounter{}
	// Before it serves: bun's hooks are not safe to add while it queries.
	//lint:ignore SA1019 the hook must count the server's own queries; WithQueryHook returns a clone the server never uses
	srv.store.DB().AddQueryHook(queries)
	for _, f := range beforeServe {
		if f != nil {
			f(srv)
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t: t, cfg: cfg, srv: srv, base: "http://" + ln.Addr().String(),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128}},
		tokens: NewTokens(cfg.JWTSecret, 0), stop: cancel, done: make(chan error, 1),
		requestQueries: queries,
	}
	go func() { h.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		h.shutdown()
		srv.Close()
		removeBrokerState(t, cfg)
	})
	return h
}

// shutdown stops the server as SIGTERM would; it is safe to call twice.
func (h *harness) shutdown() {
	h.stopOnce.Do(func() {
		h.stop()
		select {
		case err := <-h.done:
			if err != nil {
				h.t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			h.t.Error("server did not stop within 15s")
		}
	})
}

// do sends a JSON request; body may be nil, a string (sent as is) or a
// value to marshal. It returns the status and the decoded JSON body.
func (h *harness) do(method, path, token string, body any) (int, map[string]any) {
	h.t.Helper()
	status, out, _ := h.doBody(method, path, token, body)
	return status, out
}

// doWithHeader is do without a body, also returning the answer's header.
func (h *harness) doWithHeader(method, path, token string) (int, map[string]any, http.Header) {
	h.t.Helper()
	return h.doBody(method, path, token, nil)
}

func (h *harness) doBody(method, path, token string, body any) (int, map[string]any, http.Header) {
	h.t.Helper()
	return h.request(method, path, token, body, nil)
}

// request is doBody with headers of the test's own (they replace the
// defaults: a Content-Type of their own, a proxy header).
func (h *harness) request(method, path, token string, body any, header http.Header) (int, map[string]any, http.Header) {
	h.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewBufferString(b)
	default:
		buf, _ := json.Marshal(b)
		r = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, h.base+path, r)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if len(raw) > 0 && json.Unmarshal(raw, &out) != nil {
		out["_raw"] = string(raw)
	}
	// Every API answer is JSON, the hand-written ones included.
	if ct := resp.Header.Get("Content-Type"); len(raw) > 0 && strings.HasPrefix(path, "/api/") && !strings.HasPrefix(ct, "application/json") {
		h.t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return resp.StatusCode, out, resp.Header
}

// queueKey is the key of the server's queue named name for a voucher's
// shard (Deps.QueueKey).
func (h *harness) queueKey(name string, voucherID int64) string {
	return redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: h.srv.shards}.ShardKey(name, h.srv.shards.Of(voucherID))
}

func (h *harness) shopper(userID int64) string {
	h.t.Helper()
	tok, err := h.tokens.Issue(userID, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

func (h *harness) createVoucher(stock int64, begin, end time.Time) int64 {
	h.t.Helper()
	return h.createVoucherIn(stock, 1, begin, end)
}

// createVoucherIn creates a voucher whose stock is split over buckets.
func (h *harness) createVoucherIn(stock int64, buckets int, begin, end time.Time) int64 {
	h.t.Helper()
	status, body := h.do("POST", "/api/admin/vouchers", h.cfg.AdminToken, map[string]any{
		"title": "test voucher", "payValue": 100, "actualValue": 200, "stock": stock, "buckets": buckets,
		"beginTime": begin.Format(time.RFC3339Nano), "endTime": end.Format(time.RFC3339Nano),
	})
	if status != http.StatusCreated {
		h.t.Fatalf("create voucher: %d %v", status, body)
	}
	return int64(body["id"].(float64))
}

func (h *harness) openVoucher(stock int64) int64 {
	return h.openVoucherIn(stock, 1)
}

func (h *harness) openVoucherIn(stock int64, buckets int) int64 {
	return h.createVoucherIn(stock, buckets, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
}

// seesOrder waits until this instance answers a buyer's order of a
// voucher another instance created and sold. It learns of the voucher by
// that instance's nudge, or within the second the contract gives (an id it
// found nowhere, or above the highest it read, is refused for 0.9 s): a
// test asking a second instance at once raced the nudge, and on a loaded
// machine it answered 404 voucher_not_found. The buyer's order is what it
// asks for, since on the stand-ins each instance has a database of its own
// and only the live store, which both share, has the voucher.
func (h *harness) seesOrder(voucher int64, buyerToken string) {
	h.t.Helper()
	waitFor(h.t, 2*time.Second, "an instance to answer an order of a voucher created on another", func() bool {
		status, _ := h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", buyerToken, nil)
		return status == http.StatusOK
	})
}

// rows counts persisted orders of a voucher and its database stock.
func (h *harness) rows(voucherID int64) (orders int, stock int64) {
	h.t.Helper()
	ctx := context.Background()
	n, err := h.srv.store.DB().NewSelect().Table("tb_voucher_order").Where("voucher_id = ?", voucherID).Count(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	err = h.srv.store.DB().NewSelect().Table("tb_seckill_voucher").Column("stock").
		Where("voucher_id = ?", voucherID).Scan(ctx, &stock)
	if err != nil {
		h.t.Fatal(err)
	}
	return int(n), stock
}

// waitForRows polls until the voucher has want persisted orders.
func (h *harness) waitForRows(voucherID int64, want int, within time.Duration) int {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, _ := h.rows(voucherID)
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// storeGate holds the pipeline's first SaveOrders until open is called, so
// a test can build a backlog that is certain, not hoped for.
type storeGate struct {
	held     chan struct{} // closed when the first save is waiting
	released chan struct{}
	heldOnce sync.Once
	openOnce sync.Once
}

func newStoreGate() *storeGate {
	return &storeGate{held: make(chan struct{}), released: make(chan struct{})}
}

// wrapConsumers rebuilds s's pipeline with the same settings over a gated store.
func (g *storeGate) wrapConsumers(s *Server) orderConsumers {
	c := s.consumers.(queueConsumers)
	c.pipeline = core.NewPipeline(s.queue, gatedStore{g, s.store}, core.PipelineConfig{
		Consumers: s.cfg.Consumers, BatchSize: s.cfg.BatchSize, MaxDeliveries: s.cfg.MaxDeliver,
	}, s.log, s.metrics)
	return c
}

func (g *storeGate) open() { g.openOnce.Do(func() { close(g.released) }) }

func (g *storeGate) waitHeld(t testing.TB) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no save reached the gate within 10s")
	}
}

type gatedStore struct {
	g     *storeGate
	inner core.OrderStore
}

func (s gatedStore) SaveOrders(ctx context.Context, orders []core.Order) (core.SaveResult, error) {
	s.g.heldOnce.Do(func() { close(s.g.held) })
	select {
	case <-s.g.released:
	case <-ctx.Done():
		return core.SaveResult{}, ctx.Err()
	}
	return s.inner.SaveOrders(ctx, orders)
}

// freeAddr is a loopback address nobody listens on (at the moment).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// buyWithStockRowLocked locks the voucher's row in MySQL, so no consumer
// can persist its orders, and has shoppers 1 to n buy it (each answered
// 200). The caller rolls the returned transaction back to let them in.
func (h *harness) buyWithStockRowLocked(t *testing.T, voucher, n int64) bun.Tx {
	t.Helper()
	ctx := context.Background()
	lock, err := h.srv.store.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := lock.NewRaw("SELECT voucher_id FROM tb_seckill_voucher WHERE voucher_id = ? FOR UPDATE", voucher).Scan(ctx, &got); err != nil {
		lock.Rollback()
		t.Fatal(err)
	}
	for u := int64(1); u <= n; u++ {
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status != 200 {
			lock.Rollback()
			t.Fatalf("shopper %d: %d %v", u, status, body)
		}
	}
	return lock
}
