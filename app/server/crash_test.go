package server

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/core"
)

const helperEnv = "SECKILL_TEST_HELPER"

// Settings of the doomed consumer process.
const (
	doomedRedisEnv  = "SECKILL_DOOMED_REDIS"
	doomedStreamEnv = "SECKILL_DOOMED_STREAM"
	doomedDSNEnv    = "SECKILL_DOOMED_DSN" // set: persist before hanging
)

// runDoomedConsumer is a consumer process that reads a batch, persists it
// if told to, prints "holding N" and hangs before the ack, waiting for the
// test to kill it.
func runDoomedConsumer() int {
	ctx := context.Background()
	opts, err := redis.ParseURL(os.Getenv(doomedRedisEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rdb := redis.NewClient(opts)
	q, err := streamgroup.New(ctx, rdb, streamgroup.Config{
		Stream: os.Getenv(doomedStreamEnv), ConsumerPrefix: "doomed", ClaimMinIdle: time.Hour,
	}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	store := &hangingStore{}
	if dsn := os.Getenv(doomedDSNEnv); dsn != "" {
		st, err := mysqlstore.OpenMySQL(ctx, dsn, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		store.inner = st
	}
	core.NewPipeline(q, store, core.PipelineConfig{Consumers: 1, BatchSize: 1000}, nil, nil).Run(ctx)
	return 0
}

type hangingStore struct{ inner core.OrderStore }

func (s *hangingStore) SaveOrders(ctx context.Context, orders []core.Order) (core.SaveResult, error) {
	if s.inner != nil {
		if _, err := s.inner.SaveOrders(ctx, orders); err != nil {
			return core.SaveResult{}, err
		}
	}
	fmt.Printf("holding %d\n", len(orders))
	select {} // the kill comes here, before the ack
}

// TestKilledConsumersEntriesAreClaimedAndPersistedOnce kills, with SIGKILL,
// a consumer process that holds a batch: once after reading it, once after
// committing it but before the ack. Another consumer claims the entries
// after SECKILL_CLAIM_MIN_IDLE; every order ends up in the database exactly
// once, and the stock is taken once.
func TestKilledConsumersEntriesAreClaimedAndPersistedOnce(t *testing.T) {
	for _, afterPersist := range []bool{false, true} {
		name := "killed between read and persist"
		if afterPersist {
			name = "killed between persist and ack"
		}
		t.Run(name, func(t *testing.T) {
			forEachStack(t, func(c *Config) { c.Consumers = 0; c.ClaimMinIdle = 300 * time.Millisecond },
				func(t *testing.T, h *harness) {
					if afterPersist && h.cfg.EmbeddedSQL() {
						t.Skip("the embedded database lives in one process; the real stack runs this case")
					}
					killedConsumerCase(t, h, afterPersist)
				})
		})
	}
}

func killedConsumerCase(t *testing.T, h *harness, afterPersist bool) {
	const stock, buyers = 100, 40
	voucher := h.openVoucher(stock)
	for u := int64(1); u <= buyers; u++ {
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
	}

	redisURL := h.cfg.RedisURL
	if h.cfg.EmbeddedRedis() {
		redisURL = "redis://" + h.srv.mini.Addr()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=consumer", doomedRedisEnv+"="+redisURL,
		doomedStreamEnv+"="+h.queueKey("orders", voucher))
	if afterPersist {
		cmd.Env = append(cmd.Env, doomedDSNEnv+"="+h.cfg.MySQLDSN)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "holding") {
				line <- s.Text()
				return
			}
		}
		close(line)
	}()
	select {
	case l := <-line:
		if l != fmt.Sprintf("holding %d", buyers) {
			t.Fatalf("consumer said %q, want holding %d", l, buyers)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the consumer process never took the batch")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no deferred code runs
		t.Fatal(err)
	}
	cmd.Wait()

	ctx := context.Background()
	pending, err := h.srv.rdb.XPending(ctx, h.queueKey("orders", voucher), "seckill-persisters").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count != buyers || pending.Consumers["doomed-0"] != buyers {
		t.Fatalf("after the kill: %+v, want %d entries pending on doomed-0", pending, buyers)
	}
	wantRowsNow := 0
	if afterPersist {
		wantRowsNow = buyers
	}
	if n, _ := h.rows(voucher); n != wantRowsNow {
		t.Fatalf("%d rows right after the kill, want %d", n, wantRowsNow)
	}

	// A consumer of another process takes over.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		core.NewPipeline(h.srv.queue, h.srv.store, core.PipelineConfig{Consumers: 1}, nil, nil).Run(runCtx)
		close(done)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		p, err := h.srv.rdb.XPending(ctx, h.queueKey("orders", voucher), "seckill-persisters").Result()
		if err == nil && p.Count == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done

	rows, dbStock := h.rows(voucher)
	if rows != buyers || dbStock != stock-buyers {
		t.Fatalf("after the claim: %d rows, stock %d; want %d rows and stock %d (each order exactly once)",
			rows, dbStock, buyers, stock-buyers)
	}
	p, _ := h.srv.rdb.XPending(ctx, h.queueKey("orders", voucher), "seckill-persisters").Result()
	if p.Count != 0 {
		t.Fatalf("%d entries still pending after the claim", p.Count)
	}
}
