package redisreserve_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// BenchmarkReserve is one reservation per op, from 50 goroutines (the HTTP
// load's 50 connections), each a new shopper–voucher pair as while stock
// remains, with the rules users get by default (5 requests per shopper and
// second, a 15-minute pay window, the stream hand-off): one EVALSHA round
// trip each (plain), shared pipelines (coalesced), or batches of at most
// N reservations per script call (batchN); on one hot voucher, or going
// round 32 (as the wrk bench does); the order body JSON, or compact where
// the name says so. On real Redis it also reports
// redis-µs/order: Redis's CPU (INFO's used_cpu_sys + used_cpu_user) over
// the run ÷ reservations — issue 26's measure, by batch size, to find the
// knee. Redis runs nothing else meanwhile, or the figure says so. Where
// that Redis runs under valgrind's callgrind (`make redis-instructions`)
// it also reports redis-instructions/order: Redis's own instructions per
// reservation, a count that does not move with the machine's speed.
func BenchmarkReserve(b *testing.B) {
	modes := []struct {
		name     string
		coalesce bool
		batch    int
		vouchers int64 // the reservations go round them
		body     core.OrderBody
	}{{"plain", false, 0, 1, ""}, {"coalesced", true, 0, 1, ""}, {"batch4", false, 4, 1, ""}, {"batch8", false, 8, 1, ""},
		{"batch16", false, 16, 1, ""}, {"batch32", false, 32, 1, ""}, {"batch64", false, 64, 1, ""},
		{"coalesced-32vouchers", true, 0, 32, ""}, {"batch32-32vouchers", false, 32, 32, ""},
		{"batch32-compact", false, 32, 1, core.OrderBodyCompact}, {"batch32-32vouchers-compact", false, 32, 32, core.OrderBodyCompact}}
	for _, vouchers := range []int64{1, 32} {
		b.Run(fmt.Sprintf("naive-%dvouchers", vouchers), func(b *testing.B) { benchmarkNaive(b, vouchers) })
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			r, real := testenv.RealRedis(b)
			if !real {
				r = testenv.Miniredis(b)
			}
			res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: r.Prefix,
				Handoff: core.Handoff{Command: []string{"XADD", core.HandoffKey, "*", "order", core.HandoffBody},
					Key: func(int64) string { return r.Prefix + "orders" }},
				Coalesce: mode.coalesce, Batch: mode.batch, ShopperRate: 5, PayWindow: 15 * time.Minute, OrderBody: mode.body})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			res.Load(ctx)
			// What the server tells it (noeviction on the real Redis: the
			// batch then skips its whole-check; miniredis does not say).
			if st, err := redisreserve.ReadEviction(ctx, r.Client); err == nil {
				res.EvictionIs(st)
			}
			for v := int64(1); v <= mode.vouchers; v++ {
				res.LoadVoucher(ctx, core.Voucher{ID: v, Stock: 1 << 40, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)})
			}
			reserveInParallel(b, r, real, func(id int64) {
				got, err := res.Reserve(ctx, core.Order{ID: id, UserID: id, VoucherID: 1 + id%mode.vouchers, CreatedAt: time.Now()})
				if err != nil || got.Result != core.Reserved {
					b.Fatalf("reserve %d: %+v, %v", id, got, err)
				}
			})
		})
	}
}

// benchmarkNaive is BenchmarkReserve's reference: lua/naive.lua, the
// classic design's first script (stock, a set of buyers, XADD), one
// EVALSHA per reservation as its handler sends it, on the same load.
func benchmarkNaive(b *testing.B, vouchers int64) {
	r, real := testenv.RealRedis(b)
	if !real {
		r = testenv.Miniredis(b)
	}
	ctx := context.Background()
	script := redis.NewScript(lua.Naive)
	for v := int64(1); v <= vouchers; v++ {
		if err := r.Client.Set(ctx, fmt.Sprintf("%snaive:stock:%d", r.Prefix, v), 1<<40, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
	reserveInParallel(b, r, real, func(id int64) {
		v := 1 + id%vouchers
		keys := []string{fmt.Sprintf("%snaive:stock:%d", r.Prefix, v), fmt.Sprintf("%snaive:order:%d", r.Prefix, v), r.Prefix + "naive:orders"}
		if code, err := script.Run(ctx, r.Client, keys, id, v, id).Int(); err != nil || code != 0 {
			b.Fatalf("naive %d: %d, %v", id, code, err)
		}
	})
}

// reserveInParallel runs reserve for ids 1..b.N from 50 goroutines (× 2
// cores here: the HTTP load's 50 connections, so that batches can form)
// and, on real Redis, reports Redis's CPU per reservation.
func reserveInParallel(b *testing.B, r testenv.Redis, real bool, reserve func(id int64)) {
	var n atomic.Int64
	b.SetParallelism(25)
	var before float64
	var instructionsBefore int64
	counted := false
	if real {
		before = redisCPUSeconds(b, r.Client)
		instructionsBefore, counted = redisInstructions(b, r.Client)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			reserve(n.Add(1))
		}
	})
	b.StopTimer()
	if real {
		b.ReportMetric((redisCPUSeconds(b, r.Client)-before)*1e6/float64(b.N), "redis-µs/order")
	}
	if counted {
		after, _ := redisInstructions(b, r.Client)
		b.ReportMetric(float64(after-instructionsBefore)/float64(b.N), "redis-instructions/order")
	}
}

// redisInstructions is the instructions the Redis server has run so far,
// when it is a process of this machine running under valgrind's callgrind
// (callgrind_control reads its live counters); ok is false otherwise.
func redisInstructions(b *testing.B, rdb redis.UniversalClient) (n int64, ok bool) {
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	var pid string
	for _, line := range strings.Split(info, "\r\n") {
		if v, found := strings.CutPrefix(line, "process_id:"); found {
			pid = v
		}
	}
	cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
	if pid == "" || err != nil || !strings.Contains(string(cmdline), "--tool=callgrind") {
		return 0, false // another machine's Redis, or not under callgrind
	}
	out, err := exec.Command("callgrind_control", "-e", "Ir", pid).Output()
	if err != nil {
		b.Fatalf("callgrind_control -e Ir %s: %v", pid, err)
	}
	if n, ok = callgrindTotal(string(out)); !ok {
		b.Fatalf("callgrind_control -e Ir %s: no counters in %q", pid, out)
	}
	return n, true
}

// callgrindTotal sums the per-thread counters of `callgrind_control -e Ir`:
//
//	Totals:        Ir
//	 Th 1  23,302,304
//	 Th 2         518
func callgrindTotal(out string) (int64, bool) {
	var total int64
	found := false
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[0] != "Th" {
			continue
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(fields[2], ",", ""), 10, 64)
		if err != nil {
			return 0, false
		}
		total += n
		found = true
	}
	return total, found
}

// redisCPUSeconds is the Redis server's CPU time so far, system and user.
func redisCPUSeconds(b *testing.B, rdb redis.UniversalClient) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, value, _ := strings.Cut(line, ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				b.Fatal(fmt.Errorf("INFO cpu %s: %w", name, err))
			}
			total += f
		}
	}
	return total
}

// TestCallgrindTotalSumsTheThreads: the parse of callgrind_control's
// counters behind redis-instructions/order.
func TestCallgrindTotalSumsTheThreads(t *testing.T) {
	out := "PID 25549: /usr/bin/redis-server --port 6392\n\n  Totals:        Ir \n   Th 1  23,302,304 \n   Th 2         518 \n   Th 5       4,901 \n\n"
	if n, ok := callgrindTotal(out); !ok || n != 23302304+518+4901 {
		t.Fatalf("callgrindTotal = %d, %v; want %d", n, ok, 23302304+518+4901)
	}
	for _, bad := range []string{"", "PID 1: redis-server\n  Totals:  Ir\n", "   Th 1  twelve \n"} {
		if n, ok := callgrindTotal(bad); ok {
			t.Errorf("callgrindTotal(%q) = %d, true; want no total", bad, n)
		}
	}
}
