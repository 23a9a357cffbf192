package redisreserve_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
)

func TestKeysOfOneVoucherShareItsShardsSlot(t *testing.T) {
	shards := redisreserve.SpreadShards(12)
	k := redisreserve.Keys{Prefix: "seckill:", Shards: shards}
	for v := int64(1); v <= 40; v++ {
		tag := shards.TagOf(v)
		queue := k.ShardKey("orders", shards.Of(v))
		for _, key := range []string{k.Stock(v), k.Window(v), k.Orders(v), queue} {
			if redisreserve.Slot(key) != redisreserve.Slot("{"+tag+"}") {
				t.Fatalf("voucher %d: %s is not in the slot of its shard's tag %q", v, key, tag)
			}
		}
	}
	if got := k.Stock(42); got != "seckill:stock:{"+shards.TagOf(42)+"}:42" {
		t.Fatalf("stock key of voucher 42 is %s: the contract and the docs name the layout", got)
	}
	if one := (redisreserve.Keys{Prefix: "seckill:"}); one.Stock(42) != "seckill:stock:{s0}:42" {
		t.Fatalf("with the default one shard, voucher 42's stock key is %s, want seckill:stock:{s0}:42", one.Stock(42))
	}
}

func TestParseStockKeyReadsBothLayouts(t *testing.T) {
	k := redisreserve.Keys{Prefix: "p:", Shards: redisreserve.SpreadShards(3)}
	cur, ok := k.ParseStockKey(k.Stock(7))
	if !ok || cur.VoucherID != 7 || cur.Stock != k.Stock(7) || cur.Window != k.Window(7) || cur.Order != k.Orders(7) {
		t.Fatalf("current layout parsed as %+v, %v", cur, ok)
	}
	for b := range 3 {
		bk := k.Bucket(7, b, 3)
		got, ok := k.ParseStockKey(bk.Stock)
		want := redisreserve.VoucherKeys{VoucherID: 7, Bucket: b, Stock: bk.Stock, Window: bk.Window, Order: bk.Orders, Transfers: bk.Transfers()}
		if !ok || got != want {
			t.Fatalf("bucket %d parsed as %+v, %v; want %+v", b, got, ok, want)
		}
	}
	old, ok := k.ParseStockKey("p:stock:{7}")
	if !ok || old != (redisreserve.VoucherKeys{VoucherID: 7, Stock: "p:stock:{7}", Window: "p:window:{7}", Order: "p:order:{7}",
		Transfers: "p:transfers:{7}", Legacy: true}) {
		t.Fatalf("the layout before shards parsed as %+v, %v", old, ok)
	}
	for _, bad := range []string{"p:stock:{x}", "p:stock:{s1}:x", "p:stock:{s1}7", "q:stock:{7}", "p:stock:7",
		"p:stock:{s1}:7/0", "p:stock:{s1}:7/x", "p:stock:{s1}:7/", "p:stock:{s1}:07", "p:stock:{s1}:7/01", "p:stock:{s1}:7/1/2"} {
		if got, ok := k.ParseStockKey(bad); ok {
			t.Errorf("%q parsed as %+v", bad, got)
		}
	}
}

// The slots a 3-master cluster made by redis-cli gives each master.
var threeMasters = [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}

func TestSpreadShardsPutsShardsOnEveryMaster(t *testing.T) {
	for _, n := range []int{3, 6, 12} {
		shards := redisreserve.SpreadShards(n)
		perMaster := make([]int, len(threeMasters))
		for i := range n {
			slot := redisreserve.Slot(shards.Tag(i))
			for m, r := range threeMasters {
				if slot >= r[0] && slot <= r[1] {
					perMaster[m]++
				}
			}
		}
		for m, got := range perMaster {
			if got != n/3 {
				t.Errorf("%d shards: master %d serves %d shards (%v), want %d", n, m, got, perMaster, n/3)
			}
		}
	}
	if got := redisreserve.SpreadShards(1).Tag(0); got != "s0" {
		t.Errorf("the one shard's tag is %q, want s0", got)
	}
}

// TestBucketsLandOnDistinctMasters: a voucher in as many buckets as the
// cluster has masters (3 or 2, over the default 12 shards, or 3 and 6
// shards) has a bucket on each master of those `redis-cli --cluster
// create` makes, whatever its id.
func TestBucketsLandOnDistinctMasters(t *testing.T) {
	masterOf := func(tag string) int {
		slot := redisreserve.Slot(tag)
		for m, r := range threeMasters {
			if slot >= r[0] && slot <= r[1] {
				return m
			}
		}
		return -1
	}
	for _, n := range []int{3, 6, 12} {
		keys := redisreserve.Keys{Prefix: "seckill:", Shards: redisreserve.SpreadShards(n)}
		for _, buckets := range []int{2, 3} {
			for v := int64(1); v <= 40; v++ {
				seen := map[int]bool{}
				for b := range buckets {
					bk := keys.Bucket(v, b, buckets)
					m := masterOf(keys.Shards.Tag(bk.Shard))
					if seen[m] {
						t.Errorf("%d shards, voucher %d in %d buckets: two buckets on master %d", n, v, buckets, m)
					}
					seen[m] = true
					if redisreserve.Slot(bk.Stock) != redisreserve.Slot(bk.Transfers()) || redisreserve.Slot(bk.Stock) != redisreserve.Slot(bk.Limit(7)) {
						t.Errorf("voucher %d bucket %d: its keys span slots", v, b)
					}
				}
				if keys.Bucket(v, 0, buckets).Stock != keys.Stock(v) {
					t.Errorf("voucher %d: bucket 0 is not the voucher's own keys", v)
				}
			}
		}
	}
}

// Slot must agree with Redis: the shards are only spread, and the server's
// own slot checks only right, if it does.
func TestSlotAgreesWithRedis(t *testing.T) {
	keys := []string{"foo", "{user1000}.following", "a{}b", "{}{x}", "x{y", "seckill:stock:{s3.17}:9"}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("k%d", i), redisreserve.SpreadShards(12).Tag(i%12))
	}
	// Known from the Redis docs, so the test holds without a cluster too.
	if got := redisreserve.Slot("foo"); got != 12182 {
		t.Fatalf("Slot(foo) = %d, Redis says 12182", got)
	}
	c, ok := testenv.RealCluster(t)
	if !ok {
		t.Skip("no Redis Cluster (SECKILL_TEST_REDIS_CLUSTER_URL) to compare with")
	}
	for _, key := range keys {
		want, err := c.Client.ClusterKeySlot(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redisreserve.Slot(key); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
	}
}
