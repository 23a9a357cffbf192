package lab

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/app/server"
)

// The hot voucher on a Redis Cluster: one voucher sold out on a 3-master
// cluster of the bench's own, whole (every script call on the master of
// its slot) and in 3 buckets (core.Voucher.Buckets), each master's share
// of the script calls from INFO commandstats, and how long before the
// last unit was sold a shopper was first told sold out.

const (
	hotItems    = 30_000
	hotShoppers = 90_000
	hotBuckets  = 3
)

// hotRun is one sell-out's figures.
type hotRun struct {
	rate float64
	// shares are each master's part of the script calls (EVALSHA and
	// EVAL) during the run, largest first.
	shares []float64
	// early: the first sold-out answer came this long before the last
	// sale (0: not before it); left is the stock at the end.
	early time.Duration
	left  int64
}

// hotVoucher runs the sell-out whole and in buckets on one cluster, rounds
// times each, and returns the targets: in buckets, no master above 40% of
// the calls and no shopper told sold out more than 1 s before the last
// unit sold; whole, the same figures for comparison.
func (b *bench) hotVoucher(rounds int) ([]benchTarget, error) {
	var runs [2][]hotRun // whole, bucketed
	var failed error
	note := withLabT(func(t *labT) {
		cluster := redistopology.StartCluster(t)
		for round := 1; round <= rounds && failed == nil; round++ {
			for i, buckets := range []int{1, hotBuckets} {
				progressf("bench: round %d/%d: a hot voucher of %d items, %d shoppers, on a 3-master cluster, in %d bucket(s)…",
					round, rounds, hotItems, hotShoppers, buckets)
				r, err := b.hotSellOut(cluster.URL(), buckets)
				if err != nil {
					failed = err
					return
				}
				progressf("bench:   %.0f req/s; masters' shares of script calls %s; first sold out %v before the last sale; %d left",
					r.rate, percents(r.shares), r.early.Round(time.Millisecond), r.left)
				runs[i] = append(runs[i], r)
			}
		}
	})
	if failed == nil && note != "" {
		failed = fmt.Errorf("hot voucher on a cluster: %s", note)
	}
	if failed != nil {
		return nil, failed
	}
	worst := func(rs []hotRun) (share, early float64, left int64, rates []float64) {
		for _, r := range rs {
			share, early, left = max(share, r.shares[0]), max(early, r.early.Seconds()), max(left, r.left)
			rates = append(rates, r.rate)
		}
		return
	}
	ws, we, wl, wr := worst(runs[0])
	bs, be, bl, br := worst(runs[1])
	detail := func(left int64, rates []float64) string {
		return fmt.Sprintf("worst of %d rounds; %d left at the end; median %.0f req/s", rounds, left, medianOf(rates))
	}
	out := []benchTarget{
		{name: "hot voucher in 3 buckets, 3-master cluster: largest master's share of script calls", ratio: bs, target: -0.4, measured: true,
			detail: "target at most 0.40; " + detail(bl, br)},
		{name: "hot voucher in 3 buckets: first sold out before the last sale (s)", ratio: be, target: -1, measured: true,
			detail: "target under 1 s; " + detail(bl, br)},
		{name: "hot voucher whole, same cluster: largest master's share (reported)", ratio: ws, measured: true, detail: detail(wl, wr)},
		{name: "hot voucher whole: first sold out before the last sale (s, reported)", ratio: we, measured: true, detail: detail(wl, wr)},
		{name: "hot voucher in 3 buckets ÷ whole, req/s (reported)", ratio: pairedRatio(br, wr), measured: true,
			detail: "2 cores for 3 masters, the server and the load: a share, not a speed-up, is what this machine can show"},
	}
	if bl != 0 || wl != 0 {
		return out, fmt.Errorf("hot voucher: units left after the sell-out (in buckets %d, whole %d)", bl, wl)
	}
	return out, nil
}

// hotSellOut sells one voucher out on the cluster at url, with the server
// on its defaults (its consumers in the process), and reads the figures.
func (b *bench) hotSellOut(url string, buckets int) (hotRun, error) {
	cfg := b.cfg
	cfg.RedisURL, cfg.Queue, cfg.KeyPrefix = url, "streamgroup", "hot"+crand.Text()[:4]+":"
	p, err := startProcess(cfg, userDefaults(nil))
	if err != nil {
		return hotRun{}, err
	}
	defer p.stop()
	voucher, err := createVoucherIn(p.base, cfg.AdminToken, hotItems, buckets)
	if err != nil {
		return hotRun{}, err
	}
	defer dropVouchers(cfg.MySQLDSN, voucher)
	opts, err := redis.ParseClusterURL(url)
	if err != nil {
		return hotRun{}, err
	}
	rdb := redis.NewClusterClient(opts)
	defer rdb.Close()
	before, err := scriptCalls(rdb)
	if err != nil {
		return hotRun{}, err
	}
	tokens := server.NewTokens(cfg.JWTSecret, 0)
	res := runLoad(context.Background(), b.conns, 5*time.Minute, hotShoppers, buyRequests(p.base, tokens, []int64{voucher}, 1, hotShoppers))
	after, err := scriptCalls(rdb)
	if err != nil {
		return hotRun{}, err
	}
	if ok := res.Status[http.StatusOK]; ok != hotItems || res.Errors > 0 {
		return hotRun{}, fmt.Errorf("hot voucher in %d bucket(s): %d accepted of %d items (statuses %v, transport errors %d)",
			buckets, ok, hotItems, res.Status, res.Errors)
	}
	run := hotRun{rate: res.perSecond()}
	var total float64
	for addr, n := range after {
		total += float64(n - before[addr])
	}
	for addr, n := range after {
		run.shares = append(run.shares, float64(n-before[addr])/total)
	}
	slices.Sort(run.shares)
	slices.Reverse(run.shares)
	if !res.FirstConflict.IsZero() && res.FirstConflict.Before(res.LastOK) {
		run.early = res.LastOK.Sub(res.FirstConflict)
	}
	if run.left, err = liveStock(p.base, voucher); err != nil {
		return hotRun{}, err
	}
	return run, nil
}

// scriptCalls is each master's count of script calls (EVALSHA and EVAL)
// so far, by address.
func scriptCalls(rdb *redis.ClusterClient) (map[string]int64, error) {
	out := map[string]int64{}
	var mu sync.Mutex
	err := rdb.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		info, err := node.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		var n int64
		for _, line := range strings.Split(info, "\n") {
			for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
					calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
					c, _ := strconv.ParseInt(calls, 10, 64)
					n += c
				}
			}
		}
		mu.Lock()
		out[node.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	return out, err
}

// liveStock is a voucher's remaining stock as the API answers it.
func liveStock(base string, voucher int64) (int64, error) {
	resp, err := http.Get(base + "/api/vouchers/" + idString(voucher))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var v struct {
		Stock int64 `json:"stock"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("voucher %d: status %d: %v", voucher, resp.StatusCode, err)
	}
	return v.Stock, nil
}

func percents(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f%%", 100*x)
	}
	return strings.Join(parts, " ")
}
