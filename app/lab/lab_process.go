package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/app/server"
)

// labProcess is a server run as a separate process (this same binary), so
// a fault can kill it for real.
type labProcess struct {
	cmd  *exec.Cmd
	base string
	// admin is the admin token it serves with (its /metrics needs it on
	// real servers).
	admin  string
	logs   *os.File
	waited chan struct{}
}

// processEnv is the environment that makes a child process serve cfg:
// every variable of the server's table as cfg holds it
// (Config.Environment), the lab's own run settings on top (labRunSettings),
// then extra.
func processEnv(cfg server.Config, addr string, extra map[string]string) []string {
	usedPrefix(cfg.KeyPrefix)
	env := cfg.Environment()
	env["SECKILL_ADDR"] = addr
	maps.Copy(env, labRunSettings)
	maps.Copy(env, extra)
	out := os.Environ()
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// labRunSettings are what the lab's server processes run with whatever
// the configuration says: one slow consumer, so a fault lands in the
// middle of a drain; a quick claim; no per-shopper limits (the load
// generator is a crowd of shoppers from one address); JSON logs the lab
// reads. userDefaults undoes them for a run on the defaults a user gets.
var labRunSettings = map[string]string{
	"SECKILL_CONSUMERS":      "1",
	"SECKILL_BATCH_SIZE":     "20",
	"SECKILL_CONSUMER_NAME":  "lab-consumer",
	"SECKILL_CLAIM_MIN_IDLE": "2s",
	"SECKILL_SECKILL_RATE":   "0",
	"SECKILL_CODE_RATE":      "0",
	"SECKILL_LOG_FORMAT":     "json",
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startProcess starts a server process (`seckill-lab serve`) and waits
// until it answers.
func startProcess(cfg server.Config, extra map[string]string) (*labProcess, error) {
	return startProcessArgs(cfg, extra, ServeCommand)
}

// ServeCommand is the lab program's command that serves as the server
// binary does: what the lab starts its server processes with.
const ServeCommand = "serve"

// startProcessArgs starts this binary with args (a subcommand) and waits
// until it answers /healthz.
func startProcessArgs(cfg server.Config, extra map[string]string, args ...string) (*labProcess, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logs, err := os.CreateTemp("", "seckill-lab-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = processEnv(cfg, addr, extra)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		logs.Close()
		return nil, err
	}
	p := &labProcess{cmd: cmd, base: "http://" + addr, admin: cfg.AdminToken, logs: logs, waited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.waited) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.waited:
			return nil, fmt.Errorf("server process exited at start; its log: %s", logs.Name())
		default:
		}
		if resp, err := http.Get(p.base + "/healthz"); err == nil {
			resp.Body.Close()
			return p, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.kill()
	return nil, fmt.Errorf("server process did not answer within 30s; its log: %s", logs.Name())
}

// kill sends SIGKILL: no deferred code, no ack, no drain.
func (p *labProcess) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.waited
	p.logs.Close()
}

// stop sends SIGTERM and waits for a clean exit.
func (p *labProcess) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.waited:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.waited
	}
	p.logs.Close()
	if os.Getenv("SECKILL_LAB_KEEP_LOGS") == "1" {
		// For reading what a server did under a fault: kept, and named.
		fmt.Fprintln(os.Stderr, "lab: server log kept:", p.logs.Name())
		return
	}
	os.Remove(p.logs.Name())
}

// createVoucher creates an open voucher through the admin API.
func createVoucher(base, adminToken string, stock int64) (int64, error) {
	return createVoucherIn(base, adminToken, stock, 1)
}

// createVoucherIn creates a voucher on sale now whose stock is split over
// buckets (core.Voucher.Buckets).
func createVoucherIn(base, adminToken string, stock int64, buckets int) (int64, error) {
	return createVoucherAt(base, adminToken, stock, buckets, time.Now().Add(-time.Minute))
}

// createVoucherAt creates a voucher whose sale begins at begin and lasts
// an hour from now (or from begin, if later).
func createVoucherAt(base, adminToken string, stock int64, buckets int, begin time.Time) (int64, error) {
	end := time.Now().Add(time.Hour)
	if begin.After(time.Now()) {
		end = begin.Add(time.Hour)
	}
	body, _ := json.Marshal(map[string]any{"title": "lab", "payValue": 1, "actualValue": 2, "stock": stock, "buckets": buckets,
		"beginTime": begin.UTC().Format(time.RFC3339Nano),
		"endTime":   end.UTC().Format(time.RFC3339Nano)})
	req, _ := http.NewRequest(http.MethodPost, base+"/api/admin/vouchers", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var v struct {
		ID int64 `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("create voucher: status %d: %v", resp.StatusCode, err)
	}
	return v.ID, nil
}

// metricValue reads one sample of p's /metrics (0 if absent).
func metricValue(p *labProcess, prefix string) float64 {
	req, err := http.NewRequest(http.MethodGet, p.base+"/metrics", nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+p.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, prefix) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return 0
}

// dropKeys deletes a run's keys from a real Redis, so the lab and the
// bench leave nothing behind in the user's server (a bench run leaves
// streams of a few hundred thousand orders). Embedded Redis goes away with
// its process.
func dropKeys(redisURL, prefix string) {
	if redisURL == "" || prefix == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb, err := server.OpenRedis(ctx, redisURL)
	if err != nil {
		return
	}
	defer rdb.Close()
	if cluster, ok := rdb.(*redis.ClusterClient); ok {
		cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			unlinkMatching(ctx, node, prefix, false)
			return nil
		})
		return
	}
	unlinkMatching(ctx, rdb, prefix, true)
}

// unlinkMatching deletes the keys under prefix that c holds, in batches
// when they may span slots (one server), one by one otherwise (a cluster
// node refuses a multi-key UNLINK across slots).
func unlinkMatching(ctx context.Context, c redis.Cmdable, prefix string, batched bool) {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	flush := func() {
		if batched {
			c.Unlink(ctx, batch...)
		} else {
			c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range batch {
					p.Unlink(ctx, k)
				}
				return nil
			})
		}
		batch = batch[:0]
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// dropVouchers deletes the vouchers a run created, and their orders, from
// a real MySQL: runs would otherwise grow the user's tables without end,
// and each run would insert into a bigger table than the last. The
// embedded database goes away with its process.
// vouchersOnSale counts the database's vouchers whose sale has not ended.
func vouchersOnSale(mysqlDSN string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := mysqlstore.OpenMySQL(ctx, mysqlDSN, 0)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return 0, err
	}
	n, err := st.DB().NewSelect().Table("tb_seckill_voucher").Where("end_time > ?", time.Now()).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("vouchers on sale: %w", err)
	}
	return int(n), nil
}

func dropVouchers(mysqlDSN string, ids ...int64) {
	if mysqlDSN == "" || len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := mysqlstore.OpenMySQL(ctx, mysqlDSN, 0)
	if err != nil {
		return
	}
	defer st.Close()
	db := st.DB()
	// The lifecycle's rows first: they name the orders to be deleted.
	orders := db.NewSelect().Table("tb_voucher_order").Column("id").Where("voucher_id IN (?)", bun.List(ids))
	for _, table := range []string{"tb_payment_txn", "tb_payment"} {
		db.NewDelete().TableExpr(table).Where("order_id IN (?)", orders).Exec(ctx)
	}
	db.NewDelete().TableExpr("tb_order_release").Where("voucher_id IN (?)", bun.List(ids)).Exec(ctx)
	for _, table := range []struct{ name, column string }{
		{"tb_voucher_order", "voucher_id"}, {"tb_voucher_room", "voucher_id"}, {"tb_seckill_voucher", "voucher_id"}, {"tb_voucher", "id"},
	} {
		db.NewDelete().TableExpr(table.name).Where("? IN (?)", bun.Ident(table.column), bun.List(ids)).Exec(ctx)
	}
}
