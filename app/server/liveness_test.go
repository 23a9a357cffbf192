package server

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// TestAKilledConsumerProcesssOrdersArePersistedBeforeTheyExpire is the
// outside review's fault: a consumer process with the default
// per-process name is SIGKILLed holding a batch, and with the claim time
// at its default 30 s its orders waited that long, past a short pay
// window: 98 of 100 winners' orders expired still queued. Now another
// process claims them once the killed one's heartbeat lapses (1.2 s, and
// a reap), its consumer picks them up at its next fetch (a blocking read
// waits up to 1 s), and every order is persisted within 3.5 s of the
// kill, long before its payBy.
func TestAKilledConsumerProcesssOrdersArePersistedBeforeTheyExpire(t *testing.T) {
	if testing.Short() {
		t.Skip("process kill skipped in -short mode")
	}
	const stock = 20
	h := startServer(t, "real", func(c *Config) { c.Consumers, c.PayWindow = 0, 15*time.Second })
	if h.cfg.ClaimMinIdle != 30*time.Second {
		t.Fatalf("the claim time is %v, want the default 30s the review ran with", h.cfg.ClaimMinIdle)
	}
	ctx := context.Background()
	voucher := h.openVoucher(stock)
	for u := int64(1); u <= stock; u++ {
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status != 200 {
			t.Fatalf("seckill: %d %v", status, body)
		}
	}
	reserved := time.Now()
	lock, err := h.srv.store.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	var got int64
	if err := lock.NewRaw("SELECT voucher_id FROM tb_seckill_voucher WHERE voucher_id = ? FOR UPDATE", voucher).Scan(ctx, &got); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=server", "SECKILL_ADDR=127.0.0.1:0",
		"SECKILL_REDIS_URL="+h.cfg.RedisURL, "SECKILL_MYSQL_DSN="+h.cfg.MySQLDSN, "SECKILL_QUEUE=streamgroup",
		"SECKILL_KEY_PREFIX="+h.cfg.KeyPrefix, "SECKILL_JWT_SECRET="+string(h.cfg.JWTSecret), "SECKILL_ADMIN_TOKEN="+h.cfg.AdminToken,
		"SECKILL_CONSUMERS=1", "SECKILL_PAY_WINDOW=15s", "SECKILL_LOG_FORMAT=text") // the default consumer name and claim time
	var childLog lockedOutput
	cmd.Stderr, cmd.Stdout = &childLog, &childLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// The child holds the batch, its UPDATE waiting on the lock.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var waiting int
		if err := h.srv.store.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
			"WHERE DB = DATABASE() AND INFO LIKE 'UPDATE `tb_seckill_voucher`%'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer process never held a batch; its log:\n%s", childLog.String())
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	killed := time.Now()
	lock.Rollback()
	if st, err := core.CapabilitiesOf(h.srv.queue).Stats.Stats(ctx); err != nil || st.Pending == 0 {
		t.Fatalf("nothing pending after the kill (%+v, %v): the process held no batch", st, err)
	}
	// Another process's consumers, with their duties (the heartbeat and
	// the reaper among them), as the pipeline runs them.
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		core.NewPipeline(h.srv.queue, h.srv.store, core.PipelineConfig{Consumers: 1, PayWindow: 15 * time.Second}, nil, nil).Run(runCtx)
		close(stopped)
	}()
	defer func() { stop(); <-stopped }()
	n := h.waitForRows(voucher, stock, 10*time.Second)
	took := time.Since(killed)
	if n != stock || took > 3500*time.Millisecond {
		t.Fatalf("%d of %d orders persisted %v after the kill, want all within 3.5 s (the claim time is 30 s)", n, stock, took)
	}
	if payBy := reserved.Add(15 * time.Second); time.Now().After(payBy) {
		t.Fatalf("the orders were persisted after their payBy")
	}
	if strings.Contains(childLog.String(), "panic") {
		t.Fatalf("the child panicked:\n%s", childLog.String())
	}
	t.Logf("all %d orders persisted %v after the kill", stock, took.Round(10*time.Millisecond))
}
