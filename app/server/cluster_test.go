package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/adapters/listqueue"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/core"
)

// clusterConfig is the test configuration on the test Redis Cluster and the
// real MySQL; ok is false (the test skips) outside CI when either is not
// configured.
func clusterConfig(t testing.TB, queue string) (Config, testenv.Cluster) {
	t.Helper()
	c, ok := testenv.RealCluster(t)
	if !ok {
		t.Skipf("%s is not set: no Redis Cluster to test on (CI starts one)", testenv.ClusterURLEnv)
	}
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	cfg := testConfig()
	cfg.RedisURL, cfg.MySQLDSN, cfg.KeyPrefix, cfg.Queue = c.URL, dsn, c.Prefix, queue
	return cfg, c
}

// TestASaleOnRedisCluster: given go-redis's cluster URL, or one node's
// plain URL, the server runs on the cluster (login, ID worker, rate
// limits, reservation) and a contended sale ends exact: every accepted
// order persisted, none twice, the stock taken once per row.
func TestASaleOnRedisCluster(t *testing.T) {
	for _, queue := range []string{"memory", "sync"} {
		for _, form := range []string{"cluster URL", "one node's URL"} {
			t.Run(queue+"/"+form, func(t *testing.T) {
				cfg, c := clusterConfig(t, queue)
				if form == "one node's URL" {
					cfg.RedisURL = strings.Split(c.URL, "?")[0]
				}
				cfg.SeckillRate = 1000 // the limiter's script runs on the cluster too
				h := startWith(t, cfg)
				if _, isCluster := h.srv.rdb.(*redis.ClusterClient); !isCluster || !h.srv.clustered {
					t.Fatalf("the server opened %T, want a cluster client", h.srv.rdb)
				}
				// A login goes through the code keys on the cluster.
				status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": "13900000001"})
				if status != 200 {
					t.Fatalf("code: %d %v", status, body)
				}
				if status, body = h.do("POST", "/api/auth/login", "", map[string]any{"phone": "13900000001", "code": body["code"], "challenge": body["challenge"]}); status != 200 {
					t.Fatalf("login: %d %v", status, body)
				}

				const stock, shoppers = 40, 160
				voucher := h.openVoucher(stock)
				var accepted atomic.Int64
				var mu sync.Mutex
				ids := map[string]bool{}
				var wg sync.WaitGroup
				for u := int64(1); u <= shoppers; u++ {
					wg.Go(func() {
						status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
						if status == 200 {
							accepted.Add(1)
							mu.Lock()
							ids[body["orderId"].(string)] = true
							mu.Unlock()
						} else if status != 409 {
							t.Errorf("seckill: %d %v", status, body)
						}
					})
				}
				wg.Wait()
				if accepted.Load() != stock || len(ids) != stock {
					t.Fatalf("%d accepted (%d distinct ids) of stock %d", accepted.Load(), len(ids), stock)
				}
				if n := h.waitForRows(voucher, stock, 15*time.Second); n != stock {
					t.Fatalf("%d of %d accepted orders persisted", n, stock)
				}
				if rows, left := h.rows(voucher); rows != stock || left != 0 {
					t.Fatalf("%d rows, database stock %d; want %d and 0", rows, left, stock)
				}
			})
		}
	}
}

// untaggedBackend is a list backend whose key ignores the shards (d.Key,
// not d.QueueKey), as an outside backend might be written.
var registerUntagged = sync.OnceFunc(func() {
	Register(Backend{
		Name:      "untagged-list",
		Iteration: "a test's: one list key for every shard",
		Open: func(_ context.Context, d Deps) (core.Queue, error) {
			return listqueue.New(d.Redis, listqueue.Config{Key: d.Key("untagged")}, d.Log), nil
		},
	})
})

// TestABackendWhoseScriptSpansSlotsRefusesTheCluster: a backend whose queue
// key does not carry the tag of the voucher's shard could only fail every
// reservation with CROSSSLOT; the server refuses to start on a cluster,
// saying why.
func TestABackendWhoseScriptSpansSlotsRefusesTheCluster(t *testing.T) {
	registerUntagged()
	cfg, _ := clusterConfig(t, "untagged-list")
	srv, err := New(context.Background(), cfg, nil)
	if err == nil {
		srv.Close()
		t.Fatal("a backend with one global list key started on a cluster")
	}
	if !strings.Contains(err.Error(), "cannot run on this Redis Cluster") || !strings.Contains(err.Error(), "hash tag") {
		t.Fatalf("err = %v, want the reason", err)
	}
}

// TestADozenVouchersOnTheCluster: twelve vouchers, created while the
// consumers run, sold at once by thousands of shoppers on a 3-master
// cluster. The vouchers' keys lie on at least two masters (the sale is
// spread, not on one node), and for every voucher: no oversell, no buyer
// twice, every accepted order persisted, the ids answered are the ids in
// MySQL.
func TestADozenVouchersOnTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster sale skipped in -short mode")
	}
	for _, queue := range []string{"list", "stream", "streamgroup"} {
		t.Run(queue, func(t *testing.T) {
			cfg, c := clusterConfig(t, queue)
			h := startWith(t, cfg)
			if h.srv.shards.Count() != defaultClusterShards {
				t.Fatalf("%d shards on a cluster, want the default %d", h.srv.shards.Count(), defaultClusterShards)
			}
			const vouchers, stock, shoppers, workers = 12, 60, 3000, 64
			ids := make([]int64, vouchers)
			masters := map[string]bool{}
			keys := redisreserve.Keys{Prefix: cfg.KeyPrefix, Shards: h.srv.shards}
			for i := range ids {
				ids[i] = h.openVoucher(stock)
				node, err := c.Client.MasterForKey(context.Background(), keys.Stock(ids[i]))
				if err != nil {
					t.Fatal(err)
				}
				if node.Exists(context.Background(), keys.Stock(ids[i])).Val() != 1 {
					t.Fatalf("voucher %d's stock is not on the master that owns its slot", ids[i])
				}
				masters[node.Options().Addr] = true
			}
			if len(masters) < 2 {
				t.Fatalf("the %d vouchers' keys are on %d master(s), want at least two", vouchers, len(masters))
			}

			type attempt struct{ user, voucher int64 }
			work := make(chan attempt)
			var mu sync.Mutex
			answered := map[string]attempt{}
			byVoucher := map[int64]int{}
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for a := range work {
						status, body := h.do("POST", "/api/vouchers/"+idString(a.voucher)+"/seckill", h.shopper(a.user), nil)
						switch {
						case status == 200:
							mu.Lock()
							answered[body["orderId"].(string)] = a
							byVoucher[a.voucher]++
							mu.Unlock()
						case status != 409:
							t.Errorf("seckill: %d %v", status, body)
						}
					}
				})
			}
			for u := int64(1); u <= shoppers; u++ {
				work <- attempt{u, ids[u%vouchers]}
				work <- attempt{u, ids[(u*7)%vouchers]} // a second voucher, sometimes the same again
			}
			close(work)
			wg.Wait()

			for _, v := range ids {
				if byVoucher[v] != stock {
					t.Fatalf("voucher %d: %d accepted, want its stock %d (demand is %d per voucher)", v, byVoucher[v], stock, shoppers*2/vouchers)
				}
				if n := h.waitForRows(v, stock, 30*time.Second); n != stock {
					t.Fatalf("voucher %d: %d of %d accepted orders persisted", v, n, stock)
				}
				if rows, left := h.rows(v); rows != stock || left != 0 {
					t.Fatalf("voucher %d: %d rows, database stock %d; want %d and 0", v, rows, left, stock)
				}
			}
			rows := orderRows(t, h, ids)
			if len(rows) != len(answered) {
				t.Fatalf("%d rows, %d orders answered", len(rows), len(answered))
			}
			for id, row := range rows {
				a, ok := answered[id]
				if !ok || a.user != row.user || a.voucher != row.voucher {
					t.Fatalf("row %s (user %d, voucher %d) was answered as %+v, %v", id, row.user, row.voucher, a, ok)
				}
			}
		})
	}
}

type orderRow struct{ user, voucher int64 }

// orderRows reads the vouchers' rows from MySQL: order id -> its row.
func orderRows(t *testing.T, h *harness, vouchers []int64) map[string]orderRow {
	t.Helper()
	var rows []struct {
		ID        int64 `bun:"id"`
		UserID    int64 `bun:"user_id"`
		VoucherID int64 `bun:"voucher_id"`
	}
	if err := h.srv.store.DB().NewSelect().Table("tb_voucher_order").Column("id", "user_id", "voucher_id").
		Where("voucher_id IN (?)", bun.List(vouchers)).Scan(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]orderRow, len(rows))
	for _, r := range rows {
		out[strconv.FormatInt(r.ID, 10)] = orderRow{r.UserID, r.VoucherID}
	}
	return out
}

// TestAnotherShardCountOnTheClusterKeepsTheRecordedOne: a cluster cannot
// move a voucher's keys between slots in one step, so a start that asks
// for another shard count while vouchers exist is refused, with the count
// to start with; unset, the start takes the recorded count.
func TestAnotherShardCountOnTheClusterKeepsTheRecordedOne(t *testing.T) {
	cfg, _ := clusterConfig(t, "streamgroup")
	h := startWith(t, cfg)
	h.openVoucher(5)
	b, _ := lookupBackend("streamgroup")
	_, err := sameRedis(h, func(c *Config) { c.Shards = 6 }).startLayout(context.Background(), b)
	var refusal *layoutError
	if !errors.As(err, &refusal) || !strings.Contains(err.Error(), "cannot move keys between slots") ||
		!strings.Contains(err.Error(), fmt.Sprintf("start with SECKILL_SHARDS=%d", defaultClusterShards)) {
		t.Fatalf("6 shards on a cluster holding a 12-shard voucher: %v, want a refusal naming 12", err)
	}
	shards, err := sameRedis(h, func(c *Config) { c.Shards = 0 }).startLayout(context.Background(), b)
	if err != nil || !shards.Equal(h.srv.shards) {
		t.Fatalf("unset: %d shards, %v; want the recorded layout", shards.Count(), err)
	}
}

// TestAConsumerProcessKilledMidDrainOnTheCluster: a backlog of orders on
// twelve vouchers, one per shard, spread over the cluster's masters. A
// server process consumes it; half the vouchers' stock rows are locked in
// MySQL, so that process persists the other half and then holds batches
// it cannot commit. It is SIGKILLed there. Another process's consumers
// take over (claiming the dead one's pending entries, or re-reading from
// the saved cursor): every accepted order ends in MySQL once, with the ids
// the shoppers were answered. (The plain list fails it, as it should: run
// on it, the batches the dead process held are gone, 20 of each locked
// voucher's 100.)
func TestAConsumerProcessKilledMidDrainOnTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("process kill skipped in -short mode")
	}
	for _, queue := range []string{"stream", "streamgroup"} {
		t.Run(queue, func(t *testing.T) {
			cfg, _ := clusterConfig(t, queue)
			cfg.Consumers, cfg.ClaimMinIdle, cfg.BatchSize = 0, 500*time.Millisecond, 20
			h := startWith(t, cfg)
			ctx := context.Background()
			const vouchers, stock = 12, 100
			ids := make([]int64, vouchers)
			for i := range ids {
				ids[i] = h.openVoucher(stock)
			}
			answered := map[string]orderRow{}
			for u := int64(1); u <= vouchers*stock; u++ {
				v := ids[u%vouchers]
				status, body := h.do("POST", "/api/vouchers/"+idString(v)+"/seckill", h.shopper(u), nil)
				if status != 200 {
					t.Fatalf("seckill: %d %v", status, body)
				}
				answered[body["orderId"].(string)] = orderRow{u, v}
			}

			// The backlog lies on twelve shards' queues; /metrics adds them up.
			if want := fmt.Sprintf(`seckill_queue_depth{queue="%s"} %d`, queue, vouchers*stock); !strings.Contains(h.metricsText(), want) {
				t.Fatalf("/metrics lacks %q: the shards' depths do not add up", want)
			}

			locked, free := ids[:vouchers/2], ids[vouchers/2:]
			lock, err := h.srv.store.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Rollback()
			// One point lookup per row: on a table this small an IN list may
			// be read by a full scan, which would lock every row.
			for _, v := range locked {
				var got int64
				if err := lock.NewRaw("SELECT voucher_id FROM tb_seckill_voucher WHERE voucher_id = ? FOR UPDATE", v).Scan(ctx, &got); err != nil {
					t.Fatalf("lock voucher %d's stock row: %v", v, err)
				}
			}

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"=server", "SECKILL_ADDR=127.0.0.1:0",
				"SECKILL_REDIS_URL="+cfg.RedisURL, "SECKILL_MYSQL_DSN="+cfg.MySQLDSN, "SECKILL_QUEUE="+queue,
				"SECKILL_KEY_PREFIX="+cfg.KeyPrefix, "SECKILL_JWT_SECRET="+string(cfg.JWTSecret), "SECKILL_ADMIN_TOKEN="+cfg.AdminToken,
				"SECKILL_CONSUMERS=1", "SECKILL_BATCH_SIZE=20", "SECKILL_CLAIM_MIN_IDLE=500ms", "SECKILL_LOG_FORMAT=text")
			var childLog strings.Builder
			cmd.Stderr, cmd.Stdout = &childLog, &childLog
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			defer func() {
				if !killed {
					cmd.Process.Kill()
					cmd.Wait()
				}
			}()
			// Mid-drain: the free half persisted, and the process waits on
			// the lock with a batch of each locked voucher in hand.
			deadline := time.Now().Add(30 * time.Second)
			for {
				done := 0
				for _, v := range free {
					if n, _ := h.rows(v); n == stock {
						done++
					}
				}
				var waiting int
				// (MariaDB's innodb_trx does not list these waits; the
				// process list shows each stuck UPDATE.)
				if err := h.srv.store.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
					"WHERE DB = DATABASE() AND INFO LIKE 'UPDATE `tb_seckill_voucher`%'").Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				if done == len(free) && waiting >= len(locked) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the consumer process never got mid-drain: %d of %d free vouchers persisted, %d transactions waiting; its log:\n%s",
						done, len(free), waiting, childLog.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL: nothing of it runs again
				t.Fatal(err)
			}
			cmd.Wait()
			killed = true
			for _, v := range locked {
				if n, _ := h.rows(v); n != 0 {
					t.Fatalf("voucher %d has %d rows before the takeover: the lock did not hold", v, n)
				}
			}
			if queue == "streamgroup" {
				if st, err := core.CapabilitiesOf(h.srv.queue).Stats.Stats(ctx); err != nil || st.Pending == 0 {
					t.Fatalf("nothing pending after the kill (%+v, %v): the process held no batch", st, err)
				}
			}
			lock.Rollback()

			// Another process's consumers take over.
			runCtx, stop := context.WithCancel(ctx)
			stopped := make(chan struct{})
			go func() {
				core.NewPipeline(h.srv.queue, h.srv.store, core.PipelineConfig{Consumers: 1, BatchSize: 100}, nil, nil).Run(runCtx)
				close(stopped)
			}()
			for _, v := range ids {
				if n := h.waitForRows(v, stock, 30*time.Second); n != stock {
					stop()
					t.Fatalf("voucher %d: %d of %d accepted orders persisted after the takeover", v, n, stock)
				}
			}
			stop()
			<-stopped
			rows := orderRows(t, h, ids)
			if len(rows) != len(answered) {
				t.Fatalf("%d rows, %d orders answered", len(rows), len(answered))
			}
			for id, row := range rows {
				if answered[id] != row {
					t.Fatalf("row %s is %+v, answered as %+v", id, row, answered[id])
				}
			}
			for _, v := range ids {
				if n, left := h.rows(v); n != stock || left != 0 {
					t.Fatalf("voucher %d: %d rows, database stock %d: an order was counted twice or lost", v, n, left)
				}
			}
		})
	}
}

func (h *harness) metricsText() string {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+h.cfg.AdminToken)
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

// TestAMasterDownCostsOnlyItsOwnVouchers: on a cluster whose other masters
// go on serving while one is down (cluster-require-full-coverage no; with
// the default, every cluster does so until its node timeout marks the
// master failed), an unreachable master costs the sale the vouchers it
// holds and no others — while the server's once-a-second look at every
// master's run_id (the identity duty) fails against it. When it comes back
// empty, its voucher is rebuilt and sells again, exactly.
func TestAMasterDownCostsOnlyItsOwnVouchers(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of the test's own: skipped in -short mode")
	}
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	cluster := redistopology.StartPartialCoverageCluster(t)
	cfg := testConfig()
	cfg.RedisURL, cfg.MySQLDSN, cfg.Queue = cluster.URL(), dsn, "streamgroup"
	h := startWith(t, cfg)
	keys := redisreserve.Keys{Prefix: h.cfg.KeyPrefix, Shards: h.srv.shards}
	const stock = 50
	voucherOn := map[int]int64{} // master -> a voucher it holds
	for len(voucherOn) < len(cluster.Nodes) {
		v := h.openVoucher(stock)
		if m := cluster.Owner(t, keys.Stock(v)); voucherOn[m] == 0 {
			voucherOn[m] = v
		}
	}
	seckill := func(voucher, user int64) (int, map[string]any) {
		return h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(user), nil)
	}
	for _, v := range voucherOn {
		if status, body := seckill(v, 1); status != 200 {
			t.Fatalf("before: voucher %d: %d %v", v, status, body)
		}
	}

	down := cluster.Owner(t, keys.IDCounter(time.Now())) // the ID worker's first lane's master
	cluster.Nodes[down].Stop()
	time.Sleep(2500 * time.Millisecond) // the identity duty has failed twice
	for m, v := range voucherOn {
		for u := int64(2); u <= 11; u++ {
			status, body := seckill(v, u)
			switch {
			case m == down && status != 503:
				t.Fatalf("voucher %d on the stopped master: %d %v, want 503", v, status, body)
			case m != down && status != 200:
				t.Fatalf("voucher %d on a master that is up, shopper %d: %d %v, want 200", v, u, status, body)
			}
		}
	}

	// The orders of the masters that are up reach the database while the
	// other is down: a consumer's repair check does not wait on it.
	for m, v := range voucherOn {
		if m == down {
			continue
		}
		if n := h.waitForRows(v, 11, 10*time.Second); n != 11 {
			t.Errorf("voucher %d on a master that is up: %d rows while another master is down, want 11", v, n)
		}
	}

	cluster.Nodes[down].Start() // empty: nothing is kept on disk
	cluster.WaitHealthy(t)
	v := voucherOn[down]
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, body := seckill(v, 2)
		if status == 200 {
			break
		}
		if status != 503 || time.Now().After(deadline) {
			t.Fatalf("voucher %d after its master came back: %d %v", v, status, body)
		}
	}
	for m, v := range voucherOn {
		want := 11
		if m == down {
			want = 2
		}
		if n := h.waitForRows(v, want, 10*time.Second); n != want {
			t.Errorf("voucher %d: %d rows, want %d", v, n, want)
		}
		if _, left := h.rows(v); left != stock-int64(want) {
			t.Errorf("voucher %d: database stock %d, want %d", v, left, stock-int64(want))
		}
	}

	// Another master goes down. The first one's return made its own shards
	// forget (its streams had vanished), so the others' marks are behind
	// the incarnation's now: their orders are vouched for by their
	// vouchers' states, verified in it, and reach MySQL again meanwhile.
	second := (down + 1) % len(cluster.Nodes)
	cluster.Nodes[second].Stop()
	time.Sleep(2500 * time.Millisecond)
	for m, v := range voucherOn {
		if m == second {
			continue
		}
		for u := int64(20); u <= 24; u++ {
			if status, body := seckill(v, u); status != 200 {
				t.Fatalf("voucher %d, a second master down, shopper %d: %d %v, want 200", v, u, status, body)
			}
		}
	}
	for m, v := range voucherOn {
		if m == second {
			continue
		}
		want := 11 + 5
		if m == down {
			want = 2 + 5
		}
		if n := h.waitForRows(v, want, 10*time.Second); n != want {
			t.Errorf("voucher %d, a second master down: %d rows, want %d", v, n, want)
		}
	}
}
