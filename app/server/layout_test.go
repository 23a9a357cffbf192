package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/core"
)

// sameRedis is a second server's start on h's Redis and database, with
// another configuration: what a restart with other settings does, without
// the restart (an embedded Redis lives only as long as its server).
func sameRedis(h *harness, mutate func(*Config)) *Server {
	cfg := h.cfg
	mutate(&cfg)
	return &Server{cfg: cfg, log: h.srv.log, connections: connections{rdb: h.srv.rdb, clustered: h.srv.clustered, store: h.srv.store}, metrics: newMetrics(cfg.Queue)}
}

// startLayout is what a start does to the key layout: New plans it, Serve
// carries it out before it serves.
func (s *Server) startLayout(ctx context.Context, b Backend) (core.Shards, error) {
	plan, err := s.planLayout(ctx, b)
	if err != nil {
		return core.Shards{}, err
	}
	return plan.keys.Shards, s.migrateLayout(ctx, plan)
}

func streamgroupOf(t *testing.T) Backend {
	b, ok := lookupBackend("streamgroup")
	if !ok {
		t.Fatal("no streamgroup backend")
	}
	return b
}

// toLegacy renames a voucher's keys to the layout before shards, where
// the voucher id was the hash tag, and forgets the recorded layout: a Redis
// as the previous version of the server left it.
func toLegacy(t *testing.T, h *harness, voucher int64) redisreserve.VoucherKeys {
	t.Helper()
	ctx := context.Background()
	cur := redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: h.srv.shards}
	old, ok := cur.ParseStockKey(h.cfg.KeyPrefix + "stock:{" + idString(voucher) + "}")
	if !ok {
		t.Fatal("the legacy stock key does not parse")
	}
	for from, to := range map[string]string{cur.Stock(voucher): old.Stock, cur.Window(voucher): old.Window, cur.Orders(voucher): old.Order} {
		if err := h.srv.rdb.Rename(ctx, from, to).Err(); err != nil {
			t.Fatalf("rename %s: %v", from, err)
		}
	}
	h.srv.rdb.Del(ctx, cur.Layout())
	return old
}

// TestTheLayoutBeforeShardsIsMoved: a Redis holding a sale in the key
// layout before shards (voucher-tagged keys, one global stream). While that
// stream holds an order, the server refuses to start and says how to
// drain; once it is drained, the server moves each voucher's keys in one
// script: the stock left and the buyers carry over, and a second start
// finds nothing to move.
func TestTheLayoutBeforeShardsIsMoved(t *testing.T) {
	forEachStack(t, func(c *Config) { c.Queue = "streamgroup" }, func(t *testing.T, h *harness) {
		ctx := context.Background()
		voucher := h.openVoucher(3)
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
		h.waitForRows(voucher, 1, 10*time.Second)
		old := toLegacy(t, h, voucher)
		// (No request now: the running server would rebuild the voucher
		// from the database, and both layouts would hold it.)

		// The old global stream still holds an order nobody read.
		legacyStream := h.cfg.KeyPrefix + "orders"
		if err := h.srv.rdb.XAdd(ctx, &redis.XAddArgs{Stream: legacyStream, Values: []any{streamgroup.BodyField, "{}"}}).Err(); err != nil {
			t.Fatal(err)
		}
		next := sameRedis(h, func(*Config) {})
		_, err := next.startLayout(ctx, streamgroupOf(t))
		var refusal *layoutError
		if !errors.As(err, &refusal) || !strings.Contains(err.Error(), "before shards") || !strings.Contains(err.Error(), "still hold 1 orders") ||
			!strings.Contains(err.Error(), "seckill_queue_depth") {
			t.Fatalf("start with an undrained old queue: %v, want a refusal that says how to drain", err)
		}
		if h.srv.rdb.Exists(ctx, old.Stock).Val() != 1 {
			t.Fatal("the refused start moved keys anyway")
		}

		// Drained: the old stream's group has read and acked everything.
		read, err := h.srv.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "seckill-persisters", Consumer: "old",
			Streams: []string{legacyStream, ">"}, Count: 10, Block: -1}).Result()
		if err != nil || len(read) != 1 || len(read[0].Messages) != 1 {
			t.Fatalf("read the old stream: %v %v", read, err)
		}
		h.srv.rdb.XAck(ctx, legacyStream, "seckill-persisters", read[0].Messages[0].ID)
		// Planning (New) moves nothing; the migration (Serve) does.
		plan, err := next.planLayout(ctx, streamgroupOf(t))
		if err != nil || len(plan.moves) != 1 {
			t.Fatalf("plan after the drain: %d moves, %v; want the one voucher", len(plan.moves), err)
		}
		if h.srv.rdb.Exists(ctx, old.Stock).Val() != 1 {
			t.Fatal("planning the layout moved keys: New changed Redis")
		}
		shards, err := next.startLayout(ctx, streamgroupOf(t))
		if err != nil {
			t.Fatalf("start after the drain: %v", err)
		}
		if !shards.Equal(h.srv.shards) {
			t.Fatal("the start chose other shards than the running server")
		}
		if n := h.srv.rdb.Exists(ctx, old.Stock, old.Window, old.Order).Val(); n != 0 {
			t.Fatalf("%d old-layout keys left", n)
		}
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 409 || errorCode(body) != "already_purchased" {
			t.Fatalf("the first buyer again after the move: %d %v, want 409 already_purchased", status, body)
		}
		for u := int64(2); u <= 4; u++ {
			status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
			if want := map[bool]int{true: 200, false: 409}[u <= 3]; status != want {
				t.Fatalf("shopper %d after the move: %d %v, want %d (2 left of 3)", u, status, body, want)
			}
		}
		if n := h.waitForRows(voucher, 3, 10*time.Second); n != 3 {
			t.Fatalf("%d rows, want 3", n)
		}
		again, err := redisreserve.FindMoves(ctx, h.srv.rdb, redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: shards})
		if err != nil || len(again) != 0 {
			t.Fatalf("after the move, %d vouchers still to move (%v)", len(again), err)
		}
	})
}

// TestAnotherShardCountWaitsForTheQueuesToDrain: SECKILL_SHARDS other than
// the count Redis records is refused while the recorded layout's queues
// hold orders, naming the count to start with; once they are drained, the
// vouchers move to the new layout and it is recorded.
func TestAnotherShardCountWaitsForTheQueuesToDrain(t *testing.T) {
	forEachStack(t, func(c *Config) { c.Queue = "streamgroup"; c.Consumers = 0 }, func(t *testing.T, h *harness) {
		ctx := context.Background()
		voucher := h.openVoucher(5)
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
		four := sameRedis(h, func(c *Config) { c.Shards = 4 })
		_, err := four.startLayout(ctx, streamgroupOf(t))
		if err == nil || !strings.Contains(err.Error(), "SECKILL_SHARDS=4, but this Redis records 1 shards") ||
			!strings.Contains(err.Error(), "start with SECKILL_SHARDS=1") {
			t.Fatalf("another shard count with an order queued: %v, want a refusal naming the recorded count", err)
		}

		// The order is persisted and acked: nothing is held any more.
		drain(t, h)
		shards, err := four.startLayout(ctx, streamgroupOf(t))
		if err != nil {
			t.Fatalf("another shard count once drained: %v", err)
		}
		keys := redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: shards}
		if shards.Count() != 4 || h.srv.rdb.Get(ctx, keys.Stock(voucher)).Val() != "4" || h.srv.rdb.HGet(ctx, keys.Orders(voucher), "1").Val() == "" {
			t.Fatalf("after the move to 4 shards: stock %q, buyer 1 %q", h.srv.rdb.Get(ctx, keys.Stock(voucher)).Val(), h.srv.rdb.HGet(ctx, keys.Orders(voucher), "1").Val())
		}
		if got := h.srv.rdb.HGet(ctx, keys.Layout(), "shards").Val(); got != "4" {
			t.Fatalf("recorded shards %q, want 4", got)
		}
		// Unset, the next start keeps what is recorded.
		if shards, err := sameRedis(h, func(c *Config) { c.Shards = 0 }).startLayout(ctx, streamgroupOf(t)); err != nil || shards.Count() != 4 {
			t.Fatalf("SECKILL_SHARDS unset after the change: %d shards, %v; want the recorded 4", shards.Count(), err)
		}
	})
}

// drain runs the server's queue into its store until nothing is pending.
func drain(t *testing.T, h *harness) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		core.NewPipeline(h.srv.queue, h.srv.store, core.PipelineConfig{Consumers: 1}, nil, nil).Run(ctx)
		close(done)
	}()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := core.CapabilitiesOf(h.srv.queue).Stats.Stats(ctx); err == nil && st.Depth == 0 && st.Pending == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the queue did not drain")
}

// TestARestartWithAnotherShardCountMovesTheSaleBeforeServing: the whole
// start on a real Redis. New plans the new layout and changes no key (the
// old ones are all there when it returns); Serve moves the sale before its
// API answers, so the first request after the restart finds the buyer and
// the stock where the new layout puts them.
func TestARestartWithAnotherShardCountMovesTheSaleBeforeServing(t *testing.T) {
	first := startServer(t, "real", func(c *Config) { c.Queue = "streamgroup" })
	voucher := first.openVoucher(5)
	if status, body := first.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", first.shopper(1), nil); status != 200 {
		t.Fatalf("buy: %d %v", status, body)
	}
	first.waitForRows(voucher, 1, 10*time.Second)
	oldKeys := redisreserve.Keys{Prefix: first.cfg.KeyPrefix, Shards: first.srv.shards}
	first.shutdown()

	cfg := first.cfg
	cfg.Shards = 3
	newKeys := redisreserve.Keys{Prefix: cfg.KeyPrefix, Shards: redisreserve.SpreadShards(3)}
	ctx := context.Background()
	h := startWith(t, cfg, func(s *Server) {
		if s.rdb.Exists(ctx, oldKeys.Stock(voucher), oldKeys.Orders(voucher)).Val() != 2 || s.rdb.Exists(ctx, newKeys.Stock(voucher)).Val() != 0 {
			t.Error("New moved the sale's keys: the layout must change only when Serve starts")
		}
		if got := s.rdb.HGet(ctx, oldKeys.Layout(), "shards").Val(); got != "1" {
			t.Errorf("New recorded %q shards; the record changes with the move", got)
		}
	})
	if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 409 || errorCode(body) != "already_purchased" {
		t.Fatalf("the first buyer after the restart: %d %v, want 409 already_purchased", status, body)
	}
	for u := int64(2); u <= 6; u++ {
		status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
		if want := map[bool]int{true: 200, false: 409}[u <= 5]; status != want {
			t.Fatalf("shopper %d after the restart: %d %v, want %d (4 left of 5)", u, status, body, want)
		}
	}
	if n := h.waitForRows(voucher, 5, 10*time.Second); n != 5 {
		t.Fatalf("%d rows, want 5", n)
	}
	if h.srv.rdb.Exists(ctx, oldKeys.Stock(voucher)).Val() != 0 || h.srv.rdb.HGet(ctx, newKeys.Layout(), "shards").Val() != "3" {
		t.Fatal("after Serve started, the old layout's keys remain or the new count is not recorded")
	}
}

// TestAShardCountChangeMovesEveryBucket: a voucher in 3 buckets on one
// Redis of 3 shards, part sold, with units lent from two buckets to the
// third, then restarts with 6 shards and with 2 (two buckets on one
// shard): each bucket's keys — stock, window, buyers, transfers — move to
// where the new layout puts them, none is left under the old tags, every
// buyer is still one, the stock carries over, and the sale sells exactly
// its units.
func TestAShardCountChangeMovesEveryBucket(t *testing.T) {
	const units, buckets = 30, 3
	first := startServer(t, "real", func(c *Config) { c.Queue = "streamgroup"; c.Shards = 3 })
	voucher := first.openVoucherIn(units, buckets)
	path := "/api/vouchers/" + idString(voucher)
	// 14 shoppers of bucket 1 (10 units of its own: it borrows) and two of
	// each other bucket.
	var buyers []int64
	want := map[int]int{0: 2, 1: 14, 2: 2}
	for u := int64(1); len(buyers) < 18; u++ {
		if b := core.BucketOf(u, buckets); want[b] > 0 {
			want[b]--
			buyers = append(buyers, u)
		}
	}
	for _, u := range buyers {
		if status, body := first.do("POST", path+"/seckill", first.shopper(u), nil); status != 200 {
			t.Fatalf("shopper %d (bucket %d): %d %v", u, core.BucketOf(u, buckets), status, body)
		}
	}
	first.waitForRows(voucher, len(buyers), 10*time.Second)
	ctx := context.Background()
	oldKeys := redisreserve.Keys{Prefix: first.cfg.KeyPrefix, Shards: first.srv.shards}
	lenders := int64(0)
	for b := range buckets {
		lenders += first.srv.rdb.Exists(ctx, oldKeys.Bucket(voucher, b, buckets).Transfers()).Val()
	}
	if lenders == 0 {
		t.Fatal("no bucket recorded a transfer: the test lends nothing")
	}
	// A move keeps each window as it was; a rebuild from MySQL (what a
	// bucket not moved would get) writes a new generation.
	gens := map[int]string{}
	for b := range buckets {
		gens[b] = first.srv.rdb.HGet(ctx, oldKeys.Bucket(voucher, b, buckets).Window, "gen").Val()
	}
	first.shutdown()

	next := 1000
	for _, shards := range []int{6, 2} {
		cfg := first.cfg
		cfg.Shards = shards
		h := startWith(t, cfg)
		waitReady(t, h)
		newKeys := redisreserve.Keys{Prefix: cfg.KeyPrefix, Shards: redisreserve.SpreadShards(shards)}
		for b := range buckets {
			from, to := oldKeys.Bucket(voucher, b, buckets), newKeys.Bucket(voucher, b, buckets)
			if from.Stock != to.Stock && h.srv.rdb.Exists(ctx, from.Stock, from.Window, from.Orders, from.Transfers()).Val() != 0 {
				t.Errorf("%d shards: bucket %d's keys are still under its old tag (%s)", shards, b, from.Stock)
			}
			if h.srv.rdb.Exists(ctx, to.Stock, to.Window).Val() != 2 {
				t.Errorf("%d shards: bucket %d's stock or window is not at %s", shards, b, to.Stock)
			}
			if gen := h.srv.rdb.HGet(ctx, to.Window, "gen").Val(); gen != gens[b] {
				t.Errorf("%d shards: bucket %d's window has generation %q, was %q: rebuilt, not moved", shards, b, gen, gens[b])
			}
		}
		oldKeys = newKeys
		left := int64(units - len(buyers))
		if status, body := h.do("GET", path, "", nil); status != 200 || body["stock"] != float64(left) {
			t.Fatalf("%d shards: the stock after the move: %d %v, want %d", shards, status, body, left)
		}
		for _, u := range buyers {
			if status, body := h.do("POST", path+"/seckill", h.shopper(u), nil); status != 409 || errorCode(body) != "already_purchased" {
				t.Fatalf("%d shards: buyer %d (bucket %d) after the move: %d %v, want 409 already_purchased", shards, u, core.BucketOf(int64(u), buckets), status, body)
			}
		}
		// Two more buyers in each bucket, so every bucket is used in the
		// new layout (and lends again).
		for b := range buckets {
			for got := 0; got < 2; next++ {
				if core.BucketOf(int64(next), buckets) != b {
					continue
				}
				if status, body := h.do("POST", path+"/seckill", h.shopper(int64(next)), nil); status != 200 {
					t.Fatalf("%d shards: a new shopper of bucket %d: %d %v", shards, b, status, body)
				}
				buyers, got = append(buyers, int64(next)), got+1
			}
		}
		if n := h.waitForRows(voucher, len(buyers), 10*time.Second); n != len(buyers) {
			t.Fatalf("%d shards: %d rows, want %d", shards, n, len(buyers))
		}
		left = int64(units - len(buyers))
		if status, body := h.do("GET", path, "", nil); status != 200 || body["stock"] != float64(left) {
			t.Errorf("%d shards: the stock after the sales: %d %v, want %d", shards, status, body, left)
		}
		if left == 0 {
			if status, body := h.do("POST", path+"/seckill", h.shopper(int64(next)), nil); status != 409 || errorCode(body) != "sold_out" {
				t.Errorf("%d shards: a shopper after the last unit: %d %v, want 409 sold_out", shards, status, body)
			}
		}
		if status, body := h.do("GET", "/api/admin/vouchers/"+idString(voucher)+"/audit", h.cfg.AdminToken, nil); status != 200 || len(body["differences"].([]any)) != 0 {
			t.Errorf("%d shards: audit: %d %v", shards, status, body)
		}
		h.shutdown()
	}
	if len(buyers) != units {
		t.Fatalf("the test sold %d, want every unit (%d)", len(buyers), units)
	}
}
