package redisreserve_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// evalRecorder keeps the arguments of every script call a client sends.
type evalRecorder struct{ calls [][]any }

func (*evalRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *evalRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			r.calls = append(r.calls, cmd.Args())
		}
		return next(ctx, cmd)
	}
}
func (r *evalRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var headerLine = regexp.MustCompile(`(?m)^-- (KEYS|ARGV)\[(\d+)(\.\.)?\] -> (\S+)`)

// TestScriptArgumentsFollowTheHeader holds the Go side of seckill.lua's
// calling convention to its header: the KEYS in the order and form the
// header gives, the ARGV values in its order, and the hand-off from
// ARGV[8] on with the placeholders the script substitutes.
func TestScriptArgumentsFollowTheHeader(t *testing.T) {
	// The placeholders the script compares against are core's.
	for _, p := range []string{core.HandoffKey, core.HandoffBody} {
		if !strings.Contains(lua.Seckill, "'"+p+"'") {
			t.Fatalf("seckill.lua does not substitute %q", p)
		}
	}
	header := map[string]string{}
	for _, m := range headerLine.FindAllStringSubmatch(lua.Seckill, -1) {
		header[m[1]+m[2]] = m[4]
	}
	r := testenv.Miniredis(t)
	rec := &evalRecorder{}
	r.Client.AddHook(rec)
	h := core.Handoff{Command: []string{"RPUSH", core.HandoffKey, "x", core.HandoffBody}, Key: func(v int64) string { return fmt.Sprintf("q:{%d}", v) }}
	res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: r.Prefix, Handoff: h, ShopperRate: 3, PayWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := res.LoadVoucher(ctx, core.Voucher{ID: 42, Stock: 5, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	o := core.Order{ID: 9001, UserID: 7, VoucherID: 42, CreatedAt: time.Now()}
	if got, err := res.Reserve(ctx, o); err != nil || got.Result != core.Reserved {
		t.Fatalf("reserve: %+v %v", got, err)
	}
	if len(rec.calls) == 0 {
		t.Fatal("no script call seen")
	}
	args := rec.calls[len(rec.calls)-1] // evalsha, sha, numkeys, keys..., argv...
	if n, _ := args[2].(int); n != 6 {
		t.Fatalf("numkeys = %v, want 6 as in the header", args[2])
	}
	keys, argv := args[3:9], args[9:]
	// KEYS[1..3] are the voucher's keys named in the header, with the
	// test's prefix for "seckill:", the one shard's tag for {shard} and the
	// voucher id for voucherId.
	for i := 1; i <= 3; i++ {
		want := strings.Replace(strings.Replace(header[fmt.Sprintf("KEYS%d", i)], "seckill:", r.Prefix, 1), "{shard}:voucherId", "{s0}:42", 1)
		if keys[i-1] != want {
			t.Errorf("KEYS[%d] = %v, header says %s", i, keys[i-1], want)
		}
	}
	if keys[3] != h.Key(42) {
		t.Errorf("KEYS[4] = %v, want the hand-off key %s", keys[3], h.Key(42))
	}
	if want := strings.Replace(strings.Replace(header["KEYS5"], "seckill:", r.Prefix, 1), "{shard}:voucherId:userId", "{s0}:42:7", 1); keys[4] != want {
		t.Errorf("KEYS[5] = %v, header says %s", keys[4], want)
	}
	if want := strings.Replace(strings.Replace(header["KEYS6"], "seckill:", r.Prefix, 1), "{shard}", "{s0}", 1); keys[5] != want {
		t.Errorf("KEYS[6] = %v, header says %s", keys[5], want)
	}
	if header["ARGV1"] != "user" || header["ARGV2"] != "order" || header["ARGV3"] != "order" ||
		header["ARGV4"] != "seckill" || header["ARGV5"] != "deadline:" || header["ARGV6"] != "when" ||
		header["ARGV7"] != "voucher" || !strings.HasPrefix(header["ARGV8"], "the") {
		t.Fatalf("the header's ARGV lines changed: %v; update this test with the script", header)
	}
	payBy := fmt.Sprint(o.CreatedAt.Add(time.Minute).UnixMilli())
	want := []string{"7", "9001", string(core.EncodeOrder(o)), "3", "0", payBy, "42", "RPUSH", core.HandoffKey, "x", core.HandoffBody}
	if len(argv) != len(want) {
		t.Fatalf("ARGV = %v, want %v", argv, want)
	}
	for i, a := range argv {
		if got := fmt.Sprint(a); got != want[i] && !(i == 2 && string(a.([]byte)) == want[i]) {
			t.Errorf("ARGV[%d] = %v, want %s", i+1, a, want[i])
		}
	}
	// It recorded the deadline, and ran the hand-off as given.
	if got := r.Client.LRange(ctx, keys[5].(string), 0, -1).Val(); len(got) != 1 || got[0] != payBy+":9001:7:42" {
		t.Fatalf("deadlines %q, want [%s:9001:7:42]", got, payBy)
	}
	if got := r.Client.LRange(ctx, "q:{42}", 0, -1).Val(); len(got) != 2 || got[0] != "x" || got[1] != string(core.EncodeOrder(o)) {
		t.Fatalf("the queue holds %q, want [x <order>]", got)
	}
}

// TestInvalidHandoffsAreRefused: a hand-off the script could not carry out
// stops the start instead of failing every reservation.
func TestInvalidHandoffsAreRefused(t *testing.T) {
	r := testenv.Miniredis(t)
	key := func(int64) string { return "q" }
	for name, h := range map[string]core.Handoff{
		"no key":      {Command: []string{"LPUSH", "q", core.HandoffBody}, Key: key},
		"two keys":    {Command: []string{"LMOVE", core.HandoffKey, core.HandoffKey, core.HandoffBody}, Key: key},
		"no body":     {Command: []string{"LPUSH", core.HandoffKey, "x"}, Key: key},
		"no key func": {Command: []string{"LPUSH", core.HandoffKey, core.HandoffBody}},
		"no name":     {Command: []string{core.HandoffKey, core.HandoffBody}, Key: key},
	} {
		if _, err := redisreserve.New(r.Client, redisreserve.Config{Handoff: h}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// bareQueue can be fed neither by the script nor by a publisher.
type bareQueue struct{}

func (bareQueue) Capabilities() core.Capabilities                      { return core.Capabilities{Name: "bare"} }
func (bareQueue) Consumer(context.Context, int) (core.Consumer, error) { return nil, nil }
func (bareQueue) Close() error                                         { return nil }

// TestForQueueRefusesAQueueNothingFeeds: a backend whose queue offers no
// way in is refused at start, naming it, instead of accepting orders that
// could never reach a consumer.
func TestForQueueRefusesAQueueNothingFeeds(t *testing.T) {
	r := testenv.Miniredis(t)
	if _, _, err := redisreserve.ForQueue(r.Client, bareQueue{}, redisreserve.Config{}); err == nil || !strings.Contains(err.Error(), "bare") {
		t.Fatalf("err = %v, want a refusal naming the queue", err)
	}
}

// TestClusterSlotCheck: on a real cluster (miniredis answers every CLUSTER
// KEYSLOT with one slot), a queue key without the tag of the voucher's
// shard is found, and one per shard with it passes.
func TestClusterSlotCheck(t *testing.T) {
	c, ok := testenv.RealCluster(t)
	if !ok {
		t.Skipf("%s is not set: no cluster to ask (CI sets it)", testenv.ClusterURLEnv)
	}
	r := testenv.Redis{Prefix: c.Prefix}
	ctx := context.Background()
	global := handoff("xadd", r.Prefix+"orders")
	res, err := redisreserve.New(c.Client, redisreserve.Config{Prefix: r.Prefix, Handoff: global})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.CheckClusterSlots(ctx); err == nil || !strings.Contains(err.Error(), "slots") {
		t.Fatalf("one global queue key: %v, want a slot error", err)
	}
	perVoucher := global
	perVoucher.Key = func(v int64) string { return fmt.Sprintf("%sorders:{%d}", r.Prefix, v) }
	if res, err = redisreserve.New(c.Client, redisreserve.Config{Prefix: r.Prefix, Handoff: perVoucher}); err != nil {
		t.Fatal(err)
	}
	if err := res.CheckClusterSlots(ctx); err == nil {
		t.Fatal("a queue key tagged by the voucher id, not its shard, passed")
	}
	shards := redisreserve.SpreadShards(6)
	keys := redisreserve.Keys{Prefix: r.Prefix, Shards: shards}
	perShard := global
	perShard.Key = func(v int64) string { return keys.ShardKey("orders", shards.Of(v)) }
	if res, err = redisreserve.New(c.Client, redisreserve.Config{Prefix: r.Prefix, Shards: shards, Handoff: perShard}); err != nil {
		t.Fatal(err)
	}
	if err := res.CheckClusterSlots(ctx); err != nil {
		t.Fatalf("a queue key per shard: %v", err)
	}
	none, _ := redisreserve.New(c.Client, redisreserve.Config{Prefix: r.Prefix})
	if err := none.CheckClusterSlots(ctx); err != nil {
		t.Fatalf("no hand-off: %v", err)
	}
}
