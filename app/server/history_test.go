package server

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/app/lab/history"
)

// historyBackends are the backends the history check runs on: the default
// in `make test` (and CI), whole and with every voucher in 3 buckets over 3
// shards ("+buckets": the transfers between buckets race the reservations,
// the reconciles and Redis's restarts); SECKILL_TEST_HISTORY_BACKENDS names
// others (comma-separated), SECKILL_TEST_HISTORY_RUNS repeats each.
func historyBackends() ([]string, int) {
	backends := []string{"streamgroup", "streamgroup+buckets"}
	if v := os.Getenv("SECKILL_TEST_HISTORY_BACKENDS"); v != "" {
		backends = strings.Split(v, ",")
	}
	runs, _ := strconv.Atoi(os.Getenv("SECKILL_TEST_HISTORY_RUNS"))
	return backends, max(runs, 1)
}

// TestSaleHistoriesAreLinearizable is the checker the outside checks run,
// built in: two instances on one Redis and one MySQL, shoppers (repeats
// included) buying many small vouchers and reading their stock and orders,
// reconciles running the whole time, and Redis killed (SIGKILL) and
// restarted mid-run — durable, so it loses nothing, yet a new incarnation
// the sale must verify and rebuild against. Each voucher's history must
// be linearizable, and the settled state must match it and MySQL.
func TestSaleHistoriesAreLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("the history check needs a Redis of its own; skipped in -short mode")
	}
	backends, runs := historyBackends()
	for _, backend := range backends {
		for run := range runs {
			t.Run(backend+"/"+strconv.Itoa(run), func(t *testing.T) { checkHistory(t, backend) })
		}
	}
}

func checkHistory(t *testing.T, backend string) {
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set: the history check runs on the real servers (CI sets it)", testenv.MySQLDSNEnv)
	}
	proc := redistopology.StartDurableRedisProcess(t)
	cfg := testConfig()
	cfg.RedisURL, cfg.MySQLDSN = proc.URL(), dsn
	backend, bucketed := strings.CutSuffix(backend, "+buckets")
	buckets := 1
	if bucketed {
		cfg.Shards, buckets = 3, 3
	}
	if backend == "list-reliable" {
		cfg.Queue, cfg.ListReliable = "list", true
	} else {
		cfg.Queue = backend
	}
	a := startWith(t, cfg)
	b := startWith(t, cfg)

	// Small vouchers, so that many sell out and are bought at, while the
	// run lasts long enough for Redis's restart to strike mid-sale.
	const vouchers, stock, users = 8, 8, 24
	sale := history.Sale{
		URLs: []string{a.base, b.base}, AdminToken: cfg.AdminToken, Stock: stock, Users: users,
		Clients: 12, Ops: 2000, Timeout: 3 * time.Second,
	}
	for range vouchers {
		sale.Vouchers = append(sale.Vouchers, a.openVoucherIn(stock, buckets))
	}
	tokens := map[int64]string{}
	for u := int64(1); u <= users; u++ {
		tokens[u] = "Bearer " + a.shopper(u)
	}
	sale.Token = func(u int64) string { return tokens[u] }

	ops := history.Run(context.Background(), sale, history.Faults{
		ReconcileEvery: 50 * time.Millisecond,
		// Early in the sale, and later.
		Kill: proc.Restart, KillAt: []float64{0.05, 0.33},
	})
	t.Logf("%s: %d operations %v", backend, len(ops), history.Outcomes(ops))
	model := history.Model(stock)
	if bucketed {
		// A bucket may answer sold out while another is about to lend
		// its last unit (architecture.md, "A hot voucher in buckets").
		model = history.BucketModel(stock)
	}
	if err := history.CheckModel(model, ops, time.Minute); err != nil {
		t.Fatal(err)
	}
	ledger := history.SQLLedger(a.srv.Store().DB().DB)
	if err := history.Settle(context.Background(), sale, ops, ledger, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}
