package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/seckill-lab/seckill/adapters/paysandbox"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/app/internal/history"
)

// historyBackends are the backends the history check runs on: the default
// in `make test` (and CI), whole and with every voucher in 3 buckets over 3
// shards ("+buckets": the transfers between buckets race the reservations,
// the reconciles and Redis's restarts), and in 3 buckets on a cluster of
// three masters, one master restarted at a time ("+cluster": the other
// masters' buckets are kept while the restarted one's are rebuilt);
// SECKILL_TEST_HISTORY_BACKENDS names others (comma-separated),
// SECKILL_TEST_HISTORY_RUNS repeats each, SECKILL_TEST_KEEP_HISTORY keeps
// every history (not only a failed one's) under SECKILL_TEST_OUTPUT.
func historyBackends() ([]string, int) {
	backends := []string{"streamgroup", "streamgroup+buckets", "streamgroup+buckets+cluster"}
	if v := os.Getenv("SECKILL_TEST_HISTORY_BACKENDS"); v != "" {
		backends = strings.Split(v, ",")
	}
	runs, _ := strconv.Atoi(os.Getenv("SECKILL_TEST_HISTORY_RUNS"))
	return backends, max(runs, 1)
}

// TestSaleHistoriesAreLinearizable is the checker the outside checks run,
// built in: two instances on one Redis (or one cluster) and one MySQL,
// shoppers (repeats included) buying many small vouchers and reading their
// stock and orders, reconciles running the whole time, and Redis (one of
// the cluster's masters) killed (SIGKILL) and restarted mid-run — durable, so it loses nothing, yet a new incarnation
// the sale must verify and rebuild against. Each voucher's history must
// be linearizable, and the settled state must match it and MySQL. An
// operator pauses, resumes and restocks half the vouchers meanwhile.
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
	cfg := testConfig()
	cfg.MySQLDSN = dsn
	backend, clustered := strings.CutSuffix(backend, "+cluster")
	backend, bucketed := strings.CutSuffix(backend, "+buckets")
	var kill func()
	if clustered {
		// Each kill restarts the next master: its buckets get a new
		// run_id and are rebuilt, the others' are carried over.
		cluster := redistopology.StartDurableCluster(t)
		cfg.RedisURL = cluster.URL()
		next := 0
		kill = func() {
			cluster.Nodes[next%len(cluster.Nodes)].Restart()
			next++
		}
	} else {
		proc := redistopology.StartDurableRedisProcess(t)
		cfg.RedisURL, kill = proc.URL(), proc.Restart
	}
	// On the cluster a restarted master answers CLUSTERDOWN for about a
	// second while it rejoins: hundreds of requests go unanswered, each an
	// operation that may or may not have happened, and the checker's
	// search grows with them. One run in CI was not decided within a
	// minute (312 unknown of 2000, the packages' tests sharing 2 cores):
	// fewer shoppers at once there, and more time to decide.
	clients, decide := 12, time.Minute
	if clustered {
		clients, decide = 8, 3*time.Minute
	}
	buckets := 1
	if bucketed {
		// On the cluster, the default 12 shards put each of 3 buckets on
		// its own master.
		buckets = 3
		if !clustered {
			cfg.Shards = 3
		}
	}
	if backend == "list-reliable" {
		cfg.Queue = "list"
		cfg = cfg.MustWith(string(listReliable), "1")
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
		Clients: clients, Ops: 2000, Timeout: 3 * time.Second,
	}
	for range vouchers {
		sale.Vouchers = append(sale.Vouchers, a.openVoucherIn(stock, buckets))
	}
	tokens := map[int64]string{}
	for u := int64(1); u <= users; u++ {
		tokens[u] = "Bearer " + a.shopper(u)
	}
	sale.Token = func(u int64) string { return tokens[u] }

	db := a.srv.store.DB()
	// The operator steers half the vouchers (pauses, resumes and, outside
	// buckets, stock changes); the slip strikes one of the other half.
	steered := map[int64]bool{}
	for i, v := range sale.Vouchers {
		steered[v] = i%2 == 1
	}
	letters := &history.LetterFault{From: 0.08, To: 0.25, Leave: func(v int64) bool { return steered[v] },
		Slip: func(ctx context.Context, v, delta int64) error {
			_, err := db.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = stock + ? WHERE voucher_id = ?", delta, v)
			return err
		}}
	// The operator steers on every topology (whole vouchers and buckets),
	// and late in the run ends one sale.
	// On the cluster it was left out while 3 runs of about 21 failed on the
	// letter slip's voucher, which it never touched: an operator's
	// reconcile that checked the slip an instant before it began read the
	// lowered column (history.LetterFault now holds the slip off until
	// such a reconcile is answered); steering's load only made the instant
	// longer.
	steer := &history.SteerFault{Every: 50 * time.Millisecond, Skip: func(v int64) bool { return !steered[v] }, EndAt: 0.7}
	ops := history.Run(context.Background(), sale, history.Faults{
		ReconcileEvery: 50 * time.Millisecond,
		// Early in the sale, and later.
		Kill: kill, KillAt: []float64{0.05, 0.33},
		// Between the kills, one voucher's orders dead-lettered, the
		// letters rebuilt over and re-driven.
		Letters: letters,
		Steer:   steer,
	})
	if open := letters.Redrive(context.Background(), sale, 30*time.Second); open != 0 {
		t.Errorf("%d dead letters of voucher %d still open after 30 s of re-drives", open, letters.Voucher())
	}
	var resolved struct {
		Items []any `json:"items"`
	}
	history.Admin(context.Background(), a.base, cfg.AdminToken, "GET", "/api/admin/deadletters?state=resolved&limit=500&voucher="+strconv.FormatInt(letters.Voucher(), 10), &resolved)
	t.Logf("the operator's slip on voucher %d dead-lettered %d orders, re-driven", letters.Voucher(), len(resolved.Items))
	t.Logf("%s: %d operations %v", backend, len(ops), history.Outcomes(ops))
	model := history.Model(stock)
	if bucketed {
		// A bucket may answer sold out while another is about to lend
		// its last unit (architecture.md, "A hot voucher in buckets").
		model = history.BucketModel(stock)
	}
	if os.Getenv("SECKILL_TEST_KEEP_HISTORY") != "" {
		keepHistory(t, ops)
	}
	// The settled sale first: the shoppers it holds no order of reserved
	// nothing with their unanswered buys, which the check then leaves out
	// (history.Resolve); a sale that did not settle is checked whole.
	ledger := history.SQLLedger(a.srv.store.DB().DB)
	buyers, settleErr := history.Settle(context.Background(), sale, ops, ledger, 30*time.Second)
	checked := ops
	if settleErr == nil {
		checked = history.Resolve(ops, buyers)
	}
	if err := history.CheckModel(model, checked, decide); err != nil {
		keepHistory(t, ops)
		t.Error(err)
	}
	if settleErr != nil {
		t.Error(settleErr)
	}
}

// TestOrderLifecycleHistoriesAreLinearizable is the outside lifecycle
// checker, built in: two instances, shoppers buying small vouchers,
// paying at the sandbox's page (30 % of its notices lost, 20 % late) or
// sending the provider's notices themselves (once, twice, or failed),
// cancelling, leaving orders to expire under a 2 s pay window and buying
// again what came back, while an operator refunds paid orders (with their
// units or not) and, on the real servers, the second instance is
// SIGKILLed and started again mid-run. Each voucher's history must be
// linearizable against the contract's lifecycle, strictly
// (history.LifecycleModel: the provider's word, heard late, decides), and
// the settled state must agree: every answered order a row, no shopper
// with two live orders, nothing unpaid past its deadline, every unit back
// once, and the reconciliation finding no money kept or owed.
func TestOrderLifecycleHistoriesAreLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("the lifecycle check runs for seconds; skipped in -short mode")
	}
	// Without the answer memo: an instance's memo may answer sold out, or
	// a buyer already purchased, for up to its lifetime after a unit came
	// back elsewhere (the nudge on its way; under load, 1 run in about 20
	// showed it). Modelled, the moments of each release multiplied the
	// checker's states past a minute's search; the sale's checker
	// (history.Model) holds the memo to its lifetime, and this one holds
	// the lifecycle to the contract strictly.
	forEachStack(t, func(c *Config) {
		c.PayWindow, c.PayReconcileAfter = 2*time.Second, time.Second
		c.PaySandboxDropNotices, c.PaySandboxDelayNotices = 0.3, 0.2
		c.AnswerMemo = 0
	}, func(t *testing.T, a *harness) {
		urls := []string{a.base}
		var restartable *killableInstance
		if a.cfg.RedisURL != "" { // the stand-ins are each instance's own
			restartable = startKillable(t, a.cfg, "SECKILL_PAY_WINDOW=2s", "SECKILL_PAY_RECONCILE_AFTER=1s",
				"SECKILL_PAYSANDBOX_DROP_NOTICES=0.3", "SECKILL_PAYSANDBOX_DELAY_NOTICES=0.2",
				"SECKILL_PAY_PROVIDER=sandbox", "SECKILL_PAY_SECRET="+a.cfg.PaySecret, "SECKILL_ANSWER_MEMO=0")
			urls = append(urls, restartable.base)
		}
		const vouchers, stock, users = 4, 4, 10
		sale := history.LifecycleSale{
			Sale: history.Sale{
				URLs: urls, AdminToken: a.cfg.AdminToken, Stock: stock, Users: users,
				Clients: 8, Ops: 3000, Timeout: 5 * time.Second,
			},
			Sign: paysandbox.New(paysandbox.Config{Secret: []byte(a.cfg.PaySecret)}).Sign,
			Pace: 60 * time.Millisecond,
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
		defer stop()
		if restartable != nil {
			go restartable.killAt(ctx, t, rec, sale.Ops/3)
		}
		history.DriveLifecycle(context.Background(), sale, rec)
		stop()
		ops := rec.Operations()
		t.Logf("%d operations in %v: %v", len(ops), time.Duration(rec.Now()).Round(time.Millisecond), history.KindOutcomes(ops))
		if err := history.CheckLifecycle(ops, stock, a.cfg.PayWindow, time.Minute); err != nil {
			if dir := os.Getenv("SECKILL_TEST_OUTPUT"); dir != "" {
				path := filepath.Join(dir, "lifecycle-history-"+strings.ReplaceAll(t.Name(), "/", "-")+".txt")
				if werr := os.WriteFile(path, []byte(history.Describe(ops)), 0o644); werr == nil {
					t.Logf("the whole history: %s", path)
				}
			}
			t.Fatal(err)
		}
		if err := history.SettleLifecycle(context.Background(), sale, ops, a.srv.store.DB().DB, 15*time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// killableInstance is a second instance in a process of its own, on an
// address it keeps across a SIGKILL and a start again.
type killableInstance struct {
	base string
	cfg  Config
	env  []string
	cmd  *exec.Cmd
}

func startKillable(t *testing.T, cfg Config, env ...string) *killableInstance {
	base, cmd := childServer(t, cfg, env...)
	return &killableInstance{base: base, cfg: cfg, env: env, cmd: cmd}
}

// killAt SIGKILLs the instance once the history has `after` operations,
// and starts it again on its address half a second later.
func (k *killableInstance) killAt(ctx context.Context, t *testing.T, rec *history.Recorder, after int) {
	for rec.Len() < after {
		if ctx.Err() != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := k.cmd.Process.Kill(); err != nil {
		t.Errorf("kill the second instance: %v", err)
		return
	}
	k.cmd.Wait()
	time.Sleep(500 * time.Millisecond)
	base, cmd := childServer(t, k.cfg, append(k.env, "SECKILL_ADDR="+strings.TrimPrefix(k.base, "http://"))...)
	if base != k.base {
		t.Errorf("the second instance came back on %s, not %s", base, k.base)
	}
	k.cmd = cmd
	t.Logf("the second instance SIGKILLed after %d operations and started again", after)
}

// keepHistory saves a history under SECKILL_TEST_OUTPUT (CI keeps it),
// for the checker to be run on it again without the sale: history.Load.
func keepHistory(t *testing.T, ops []porcupine.Operation) {
	dir := os.Getenv("SECKILL_TEST_OUTPUT")
	if dir == "" {
		return
	}
	path := filepath.Join(dir, "history-"+strings.ReplaceAll(t.Name(), "/", "-")+".jsonl")
	if err := history.Save(path, ops); err != nil {
		t.Logf("the history could not be kept: %v", err)
		return
	}
	t.Logf("the whole history: %s", path)
}
