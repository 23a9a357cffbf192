package server

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/app/lab/history"
)

// historyBackends are the backends the history check runs on: the default
// in `make test` (and CI); SECKILL_TEST_HISTORY_BACKENDS names others
// (comma-separated), SECKILL_TEST_HISTORY_RUNS repeats each.
func historyBackends() ([]string, int) {
	backends := []string{"streamgroup"}
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
		sale.Vouchers = append(sale.Vouchers, a.openVoucher(stock))
	}
	tokens := map[int64]string{}
	for u := int64(1); u <= users; u++ {
		tokens[u] = "Bearer " + a.shopper(u)
	}
	sale.Token = func(u int64) string { return tokens[u] }

	rec := history.NewRecorder()
	ctx, stop := context.WithCancel(context.Background())
	var faults sync.WaitGroup
	faults.Go(func() { // reconciles, on either instance, all along
		for ctx.Err() == nil {
			v := sale.Vouchers[rand.IntN(len(sale.Vouchers))]
			base := sale.URLs[rand.IntN(len(sale.URLs))]
			history.Admin(ctx, base, cfg.AdminToken, "POST", "/api/admin/vouchers/"+strconv.FormatInt(v, 10)+"/reconcile", nil)
			time.Sleep(50 * time.Millisecond)
		}
	})
	faults.Go(func() { // Redis killed twice: early in the sale, and later
		for _, at := range []int{sale.Ops / 20, sale.Ops / 3} {
			for ctx.Err() == nil && len(rec.Operations()) < at {
				time.Sleep(5 * time.Millisecond)
			}
			if ctx.Err() == nil {
				proc.Restart()
			}
		}
	})
	history.Drive(ctx, sale, rec)
	stop()
	faults.Wait()

	ops := rec.Operations()
	outcomes := map[string]int{}
	for _, op := range ops {
		outcomes[op.Output.(history.Output).Outcome.String()]++
	}
	t.Logf("%s: %d operations %v", backend, len(ops), outcomes)
	if err := history.Check(ops, stock, time.Minute); err != nil {
		t.Fatal(err)
	}
	db := a.srv.Store().DB()
	ledger := func(ctx context.Context, v int64) (map[int64]int64, int64, error) {
		orders := map[int64]int64{}
		rows, err := db.QueryContext(ctx, "SELECT id, user_id FROM tb_voucher_order WHERE voucher_id = ?", v)
		if err != nil {
			return nil, 0, err
		}
		defer rows.Close()
		for rows.Next() {
			var id, user int64
			if err := rows.Scan(&id, &user); err != nil {
				return nil, 0, err
			}
			orders[id] = user
		}
		var left int64
		err = db.QueryRowContext(ctx, "SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?", v).Scan(&left)
		return orders, left, err
	}
	if err := history.Settle(context.Background(), sale, ops, ledger, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}
