package redisreserve_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
)

// stockLedger is the database's side of a sale whose orders were never
// persisted: each voucher's stock column as loaded, no orders. A voucher
// it rebuilds loses every buyer Redis had, which is how these tests tell a
// rebuild from a state carried over.
type stockLedger map[int64]core.Voucher

func (l stockLedger) SaleSnapshot(_ context.Context, id int64, _ []int64) (core.Voucher, []core.Order, map[int64]core.OrderStatus, error) {
	v, ok := l[id]
	if !ok {
		return core.Voucher{}, nil, nil, core.ErrVoucherNotFound
	}
	return v, nil, map[int64]core.OrderStatus{}, nil
}

func (l stockLedger) FindVoucher(ctx context.Context, id int64) (core.Voucher, error) {
	v, _, _, err := l.SaleSnapshot(ctx, id, nil)
	return v, err
}

func (stockLedger) LetteredOrders(context.Context, int64) ([]core.Order, error) { return nil, nil }

func (stockLedger) OrderStatuses(context.Context, []int64) (map[int64]core.OrderStatus, error) {
	return map[int64]core.OrderStatus{}, nil
}

// noneHeld is a queue that holds no order.
type noneHeld struct{}

func (noneHeld) HeldOrders(context.Context, int64) ([]core.Order, error) { return nil, nil }

// TestOneMastersRestartRebuildsOnlyWhatItHeld: on a three-master cluster,
// one master restarts (empty, then from an older snapshot). The vouchers on
// the other masters are carried over to the new incarnation as they are —
// buyers the database never saw kept, no new generation — and those on the
// restarted master are rebuilt, and of a voucher in buckets the bucket
// there (the others keep their buyers: TestALostBucketIsRebuiltAlone...).
// A forgetting recorded on one shard since rebuilds that shard's vouchers,
// and one recorded on every shard rebuilds every voucher whole.
func TestOneMastersRestartRebuildsOnlyWhatItHeld(t *testing.T) {
	cluster, rdb, identity, res := onOwnCluster(t)
	ctx := context.Background()
	keys := res.Keys()
	ledger := stockLedger{}
	// Vouchers 1..3 whole (one per shard, so one per master), voucher 4 in
	// three buckets (one on each master).
	for id := int64(1); id <= 4; id++ {
		v := core.Voucher{ID: id, Title: "t", Stock: 30, BeginAt: past(), EndAt: future()}
		if id == 4 {
			v.Buckets = 3
		}
		ledger[id] = v
		if err := res.LoadVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	guard := recovery.New(recovery.Config{Live: res.Live(), Buckets: res, Ledger: ledger, Queue: core.Capabilities{Holder: noneHeld{}}, Log: testenv.Log(t)})
	order := int64(1000)
	buy := func(voucher int64, users ...int64) {
		t.Helper()
		for _, u := range users {
			order++
			got, err := res.Reserve(ctx, core.Order{ID: order, UserID: u, VoucherID: voucher, CreatedAt: time.Now()})
			if err != nil || got.Result != core.Reserved {
				t.Fatalf("voucher %d, user %d: %v %v", voucher, u, got.Result, err)
			}
		}
	}
	for id := int64(1); id <= 4; id++ {
		if err := guard.Ensure(ctx, id, core.Wait); err != nil {
			t.Fatal(err)
		}
		buy(id, 1, 2, 3, 4, 5, 6)
	}
	// gens is each voucher's bucket 0 generation: a rebuild writes a new one.
	gens := func() map[int64]string {
		out := map[int64]string{}
		for id := int64(1); id <= 4; id++ {
			out[id] = rdb.HGet(ctx, keys.Bucket(id, 0, ledger[id].BucketCount()).Window, "gen").Val()
		}
		return out
	}
	buyers := func(id int64) int {
		t.Helper()
		s, err := res.Live().LiveState(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return len(s.Buyers)
	}
	// The master of voucher 1's keys restarts; 2 and 3 are elsewhere.
	victim := cluster.Owner(t, keys.Window(1))
	for _, id := range []int64{2, 3} {
		if cluster.Owner(t, keys.Window(id)) == victim {
			t.Fatalf("vouchers 1 and %d on one master: the shards are not spread", id)
		}
	}
	ensureAll := func(inc string) {
		t.Helper()
		for id := int64(1); id <= 4; id++ {
			if err := guard.Ensure(ctx, id, core.Wait); err != nil {
				t.Fatalf("voucher %d: %v", id, err)
			}
			if was, ok, err := res.Live().VerifiedIn(ctx, id); err != nil || !ok || was != inc {
				t.Fatalf("voucher %d verified in %q (%v %v), want the new incarnation %q", id, was, ok, err, inc)
			}
		}
	}
	// lostBucket is the buyers voucher 4 keeps when only its bucket on the
	// restarted master is lost.
	lostBucket := func() int {
		t.Helper()
		kept := 0
		for b := range 3 {
			if cluster.Owner(t, keys.Bucket(4, b, 3).Window) != victim {
				kept += int(rdb.HLen(ctx, keys.Bucket(4, b, 3).Orders).Val())
			}
		}
		return kept
	}
	check := func(when string, carried map[int64]bool, before map[int64]string, keeps4 int) {
		t.Helper()
		after := gens()
		for id := int64(1); id <= 4; id++ {
			switch n := buyers(id); {
			case id == 4:
				if n != keeps4 || after[id] == before[id] {
					t.Errorf("%s: voucher 4 has %d buyers, generation %q (was %q): want the %d of its intact buckets, and a new generation",
						when, n, after[id], before[id], keeps4)
				}
			case carried[id] && (n != 6 || after[id] != before[id]):
				t.Errorf("%s: voucher %d has %d buyers (want the 6 Redis had) and generation %q (was %q): rebuilt, want it carried over",
					when, id, n, after[id], before[id])
			case !carried[id] && (n != 0 || after[id] == before[id]):
				t.Errorf("%s: voucher %d has %d buyers, generation %q (was %q): want it rebuilt from the database (no buyers)",
					when, id, n, after[id], before[id])
			}
		}
	}

	before, keeps4 := gens(), lostBucket()
	cluster.Nodes[victim].RestartEmpty()
	cluster.WaitHealthy(t)
	inc, err := identity.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ensureAll(inc)
	check("restarted empty", map[int64]bool{2: true, 3: true}, before, keeps4)

	// From an older snapshot: the keys come back as the snapshot had them,
	// window and all, written by the server before the restart.
	for id := int64(1); id <= 4; id++ {
		buy(id, 11, 12, 13, 14, 15, 16)
	}
	cluster.Nodes[victim].Snapshot()
	for id := int64(1); id <= 4; id++ {
		buy(id, 21)
	}
	before, keeps4 = gens(), lostBucket()
	cluster.Nodes[victim].RestartFromSnapshot()
	cluster.WaitHealthy(t)
	if inc, err = identity.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{2, 3} {
		// The 6 bought since the first restart and the one after the
		// snapshot.
		if n := buyers(id); n != 13 {
			t.Fatalf("voucher %d: %d buyers before the second restart's check, want 13", id, n)
		}
	}
	ensureAll(inc)
	for _, id := range []int64{2, 3} {
		if n := buyers(id); n != 13 {
			t.Errorf("from a snapshot: voucher %d has %d buyers, want the 13 it had: carried over", id, n)
		}
	}
	after := gens()
	if n := buyers(4); n != keeps4 || after[4] == before[4] {
		t.Errorf("from a snapshot: voucher 4 has %d buyers, generation %q (was %q): want the %d of its intact buckets, and a new generation",
			n, after[4], before[4], keeps4)
	}
	for _, id := range []int64{1} {
		if n := buyers(id); n != 0 || after[id] == before[id] {
			t.Errorf("from a snapshot: voucher %d has %d buyers, generation %q (was %q): the snapshot's state was carried over, want it rebuilt",
				id, n, after[id], before[id])
		}
	}

	// A forgetting on voucher 2's shard (its queue's stream gone, say):
	// voucher 2 is rebuilt, 3 is carried over.
	for _, id := range []int64{2, 3} {
		buy(id, 31)
	}
	before = gens()
	if inc, err = identity.Forget(ctx, keys.Bucket(2, 0, 1).Forgets()); err != nil {
		t.Fatal(err)
	}
	ensureAll(inc)
	if n, after := buyers(2), gens(); n != 0 || after[2] == before[2] {
		t.Errorf("a forgetting on its shard: voucher 2 has %d buyers, generation %q (was %q): want it rebuilt", n, after[2], before[2])
	}
	if n, after := buyers(3), gens(); n != 14 || after[3] != before[3] {
		t.Errorf("a forgetting on another shard: voucher 3 has %d buyers (want 14), generation %q (was %q): want it carried over", n, after[3], before[3])
	}

	// A forgetting anywhere (keys evicted): nothing is carried over.
	for _, id := range []int64{2, 3} {
		buy(id, 41)
	}
	before = gens()
	if inc, err = identity.Forget(ctx); err != nil {
		t.Fatal(err)
	}
	ensureAll(inc)
	check("after a forgetting", map[int64]bool{}, before, 0)
}

// followedCluster is a client of the cluster, on a prefix of its own, with
// the identity that follows its incarnation, as the server wires them.
func followedCluster(t *testing.T, cluster *redistopology.Cluster) (string, *redis.ClusterClient, *redisreserve.Identity) {
	t.Helper()
	prefix := "t" + testenv.RandomSuffix() + ":"
	identity := redisreserve.NewIdentity(prefix)
	opt, err := redis.ParseClusterURL(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.OnConnect = identity.OnConnect
	rdb := redis.NewClusterClient(opt)
	t.Cleanup(func() { rdb.Close() })
	identity.Attach(rdb)
	return prefix, rdb, identity
}

// onOwnCluster starts a three-master cluster of the test's own and a
// Reserver on it (3 shards, so one per master) that follows Redis's
// incarnation, as the server wires it.
func onOwnCluster(t *testing.T) (*redistopology.Cluster, *redis.ClusterClient, *redisreserve.Identity, *redisreserve.Reserver) {
	t.Helper()
	if testing.Short() {
		t.Skip("a cluster of the test's own: skipped in -short mode")
	}
	cluster := redistopology.StartCluster(t)
	prefix, rdb, identity := followedCluster(t, cluster)
	res, err := redisreserve.New(rdb, redisreserve.Config{Prefix: prefix, Shards: redisreserve.SpreadShards(3), Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return cluster, rdb, identity, res
}

// TestAMasterOutOfReachHoldsNoRepairOfTheOthersOrders: while one master is
// out of reach the incarnation cannot be read whole, and a consumer's
// repair asks the masters of its orders instead (Unaffected): orders on a
// master that is the server of readIn, on a shard no forgetting touched
// since, need no repair; an order on a shard forgotten since, on the
// master out of reach, or read in an incarnation that master was not part
// of, cannot be vouched for. An order on a shard behind a later forgetting
// of other shards, which its mark cannot tell from one touched after, is
// vouched for by its voucher's state once verified in the incarnation it
// was read in.
func TestAMasterOutOfReachHoldsNoRepairOfTheOthersOrders(t *testing.T) {
	cluster, _, identity, res := onOwnCluster(t)
	ctx := context.Background()
	keys := res.Keys()
	ledger := stockLedger{}
	orders := map[int64]core.Order{} // voucher -> an order of it
	for id := int64(1); id <= 3; id++ {
		v := core.Voucher{ID: id, Title: "t", Stock: 30, BeginAt: past(), EndAt: future()}
		ledger[id] = v
		if err := res.LoadVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
		o := core.Order{ID: 100 + id, UserID: 1, VoucherID: id, CreatedAt: time.Now()}
		if got, err := res.Reserve(ctx, o); err != nil || got.Result != core.Reserved {
			t.Fatalf("voucher %d: %v %v", id, got.Result, err)
		}
		orders[id] = o
	}
	readIn, err := identity.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unaffected := func(readIn string, vouchers ...int64) bool {
		t.Helper()
		var batch []core.Order
		for _, v := range vouchers {
			batch = append(batch, orders[v])
		}
		ok, err := res.Live().Unaffected(ctx, readIn, batch)
		if err != nil {
			t.Fatalf("vouchers %v: %v", vouchers, err)
		}
		return ok
	}
	if !unaffected(readIn, 1, 2, 3) {
		t.Fatal("nothing changed since readIn, and the orders are not vouched for")
	}
	if _, mark, _ := strings.Cut(readIn, "/"); unaffected("0123456789abcdef/"+mark, 1) {
		t.Fatal("vouched for orders read in an incarnation their master was not part of")
	}

	// Voucher 1's shard forgets (its queue's stream vanished, say).
	after, err := identity.Forget(ctx, keys.ShardForgets(res.Keys().Shards.Of(1)))
	if err != nil {
		t.Fatal(err)
	}
	if unaffected(readIn, 1) {
		t.Fatal("vouched for an order on a shard that forgot since it was read")
	}
	if !unaffected(readIn, 2) {
		t.Fatal("an order on a shard the forgetting did not touch is not vouched for")
	}
	// Read in the incarnation after the forgetting, the order of voucher 2
	// is on a shard behind it: its mark cannot vouch for it, its state
	// can, once verified in that incarnation (carried over), and until
	// then nothing does.
	if unaffected(after, 2) {
		t.Fatal("vouched for an order on a shard behind the last forgetting, its state not verified since")
	}
	guard := recovery.New(recovery.Config{Live: res.Live(), Buckets: res, Ledger: ledger, Queue: core.Capabilities{Holder: noneHeld{}}, Log: testenv.Log(t)})
	for id := int64(1); id <= 3; id++ {
		if err := guard.Ensure(ctx, id, core.Wait); err != nil {
			t.Fatal(err)
		}
	}
	if !unaffected(after, 1, 2, 3) {
		t.Fatal("orders read in the incarnation their vouchers were verified in are not vouched for")
	}
	if unaffected(readIn, 1) {
		t.Fatal("vouched for an order read before its voucher's rebuild")
	}

	// Voucher 3's master goes out of reach.
	down := cluster.Owner(t, keys.Window(3))
	if cluster.Owner(t, keys.Window(2)) == down {
		t.Fatal("vouchers 2 and 3 on one master: the shards are not spread")
	}
	cluster.Nodes[down].Stop()
	if _, err := identity.Refresh(ctx); err == nil {
		t.Fatal("the incarnation was read whole with a master stopped")
	}
	if !unaffected(readIn, 2) || !unaffected(after, 2) {
		t.Fatal("an order of a master that answers is not vouched for while another is out of reach")
	}
	if ok, err := res.Live().Unaffected(ctx, after, []core.Order{orders[3]}); ok || err == nil {
		t.Fatalf("an order of the master out of reach: %v, %v; want not vouched for, and why", ok, err)
	}
	if err := guard.RepairAfter(ctx, after, []core.Order{orders[2]}); err != nil {
		t.Fatalf("the repair of an order whose master answers, another out of reach: %v", err)
	}
	if err := guard.RepairAfter(ctx, after, []core.Order{orders[3]}); err == nil {
		t.Fatal("the repair of an order on the master out of reach went through")
	}
}
