package redisreserve_test

import (
	"cmp"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
	"github.com/seckill-lab/seckill/lua"
)

// TestALostBucketIsRebuiltAloneAndKeepsEveryUnit: a voucher in three
// buckets on a three-master cluster, with transfers caught between their
// steps — one from the bucket about to be lost to an intact one, one
// between the two intact buckets, one from an intact bucket to the lost
// one — loses one bucket with its master (restarted empty). The rebuild
// fences only that bucket and freezes the others (no unit moves while it
// counts); the intact buckets keep their buyers, the lost one gets every
// unit the others do not hold, the transfer from the lost lender is voided,
// and the sale then sells exactly the voucher's units, not one more or less.
func TestALostBucketIsRebuiltAloneAndKeepsEveryUnit(t *testing.T) {
	cluster, rdb, identity, res := onOwnCluster(t)
	ctx := context.Background()
	keys := res.Keys()
	const id, units, n = 7, 60, 3
	v := core.Voucher{ID: id, Title: "t", Stock: units, Buckets: n, BeginAt: past(), EndAt: future()}
	if err := res.LoadVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	ledger := stockLedger{id: v} // no order ever persisted
	guard := recovery.New(recovery.Config{Live: res.Live(), Buckets: res, Ledger: ledger, Queue: core.Capabilities{Holder: noneHeld{}}, Log: testenv.Log(t),
		Wait: 300 * time.Millisecond})
	if err := guard.Ensure(ctx, id, core.Wait); err != nil {
		t.Fatal(err)
	}
	bucket := func(b int) redisreserve.BucketKeys { return keys.Bucket(id, b, n) }
	// Six buyers in each bucket.
	order, user := int64(1000), int64(0)
	bought := map[int]int{}
	buy := func() core.ReservationResult {
		t.Helper()
		order++
		user++
		got, err := res.Reserve(ctx, core.Order{ID: order, UserID: user, VoucherID: id, CreatedAt: time.Now()})
		if err != nil {
			t.Fatalf("user %d: %v", user, err)
		}
		if got.Result == core.Reserved {
			bought[core.BucketOf(user, n)]++
		}
		return got.Result
	}
	for bought[0] < 6 || bought[1] < 6 || bought[2] < 6 {
		if r := buy(); r != core.Reserved {
			t.Fatalf("user %d: %v before anything was sold out", user, r)
		}
	}
	lostB := 2
	victim := cluster.Owner(t, bucket(lostB).Window)
	for b := range n {
		if b != lostB && cluster.Owner(t, bucket(b).Window) == victim {
			t.Fatalf("buckets %d and %d on one master", b, lostB)
		}
	}
	// Transfers caught after their take, before their give.
	pend := redis.NewScript(lua.BucketPend)
	take := redis.NewScript(lua.BucketTake)
	caught := func(tid string, from, to int, want int64) int64 {
		t.Helper()
		borrower, lender := bucket(to), bucket(from)
		p, err := pend.Run(ctx, rdb, []string{borrower.Stock, borrower.Window, borrower.Transfers()}, tid, from, want).Slice()
		if err != nil || p[0] != int64(1) {
			t.Fatalf("pend %s: %v %v", tid, p, err)
		}
		got, err := take.Run(ctx, rdb, []string{lender.Stock, lender.Window, lender.Transfers()},
			tid, to, want, p[1], p[2], time.Minute.Milliseconds()).Int64()
		if err != nil || got != want {
			t.Fatalf("take %s: %d %v, want %d", tid, got, err, want)
		}
		return got
	}
	caught("from-lost", lostB, 0, 3)
	caught("between-intact", 0, 1, 2)
	caught("to-lost", 1, lostB, 4)
	state, err := res.Live().LiveState(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := state.Stock + int64(len(state.Buyers)); got != units {
		t.Fatalf("before the loss: %d units (stock and in transit %d, buyers %d), want %d", got, state.Stock, len(state.Buyers), units)
	}
	intactBuyers := map[int]int64{}
	for b := range n {
		intactBuyers[b] = rdb.HLen(ctx, bucket(b).Orders).Val()
	}

	cluster.Nodes[victim].RestartEmpty()
	cluster.WaitHealthy(t)
	if _, err := identity.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	// The fence of a rebuild of the lost bucket alone: the intact buckets
	// are frozen, not fenced — they keep their stock, and lend nothing.
	token, ok, err := res.Live().FenceLost(ctx, id, 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("fence the lost bucket: %v %v", ok, err)
	}
	for b := range n {
		has := rdb.Exists(ctx, bucket(b).Stock).Val() == 1
		if frozen := rdb.HGet(ctx, bucket(b).Window, "freeze").Val() == token; b != lostB && (!has || !frozen) {
			t.Errorf("intact bucket %d: stock kept %v, frozen %v; want both", b, has, frozen)
		}
	}
	if fenced, _ := res.Live().Fenced(ctx, id); !fenced {
		t.Error("the lost bucket is not fenced")
	}
	p, err := pend.Run(ctx, rdb, []string{bucket(1).Stock, bucket(1).Window, bucket(1).Transfers()}, "while-frozen", 0, 1).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := take.Run(ctx, rdb, []string{bucket(0).Stock, bucket(0).Window, bucket(0).Transfers()},
		"while-frozen", 1, 1, p[1], p[2], time.Minute.Milliseconds()).Int64(); err != nil || got != -1 {
		t.Fatalf("a take from a frozen bucket: %d %v, want -1 (not loaded: never a grant of none)", got, err)
	}
	// Meanwhile (the rebuild holding the fence and the freezes could be
	// another instance's), a shopper of an intact bucket buys at once, and
	// one of the lost bucket waits for the rebuild.
	var intactUser, lostUser int64
	for u := user + 1; intactUser == 0 || lostUser == 0; u++ {
		if core.BucketOf(u, n) == lostB {
			lostUser = cmp.Or(lostUser, u)
		} else {
			intactUser = cmp.Or(intactUser, u)
		}
	}
	user = max(intactUser, lostUser)
	start := time.Now()
	if err := guard.EnsureShopper(ctx, id, intactUser); err != nil || time.Since(start) > time.Second {
		t.Fatalf("a shopper of an intact bucket during the rebuild: %v after %v, want to go on at once", err, time.Since(start))
	}
	order++
	if got, err := res.Reserve(ctx, core.Order{ID: order, UserID: intactUser, VoucherID: id, CreatedAt: time.Now()}); err != nil || got.Result != core.Reserved {
		t.Fatalf("a shopper of a frozen bucket: %v %v, want reserved", got.Result, err)
	}
	intactBuyers[core.BucketOf(intactUser, n)]++
	if err := guard.EnsureShopper(ctx, id, lostUser); !errors.Is(err, core.ErrBusy) {
		t.Fatalf("a shopper of the lost bucket during its rebuild: %v, want busy (it waits for the rebuild)", err)
	}
	if err := res.Live().Unfence(ctx, id, token); err != nil {
		t.Fatal(err)
	}
	if rdb.HExists(ctx, bucket(0).Window, "freeze").Val() {
		t.Fatal("a failed rebuild's freeze was not lifted")
	}

	// The rebuild itself, as the request path starts it.
	if err := guard.Ensure(ctx, id, core.Wait); err != nil {
		t.Fatal(err)
	}
	for b := range n {
		got := rdb.HLen(ctx, bucket(b).Orders).Val()
		switch {
		case b == lostB && got != 0:
			t.Errorf("lost bucket %d: %d buyers, want none (no order of it was persisted)", b, got)
		case b != lostB && got != intactBuyers[b]:
			t.Errorf("intact bucket %d: %d buyers, want the %d it had", b, got, intactBuyers[b])
		}
		if rdb.HExists(ctx, bucket(b).Window, "freeze").Val() {
			t.Errorf("bucket %d is still frozen", b)
		}
	}
	if rdb.HExists(ctx, bucket(0).Transfers(), "in:from-lost").Val() {
		t.Error("the transfer from the lost lender is still pending: its units would arrive twice")
	}
	// The voucher's units are its column (nothing persisted): the intact
	// buckets' buyers hold theirs, and the lost bucket's buyers, gone with
	// their orders (none persisted, none held), gave theirs back.
	want := int64(units) - intactBuyers[0] - intactBuyers[1]
	state, err = res.Live().LiveState(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := state.Stock + int64(len(state.Buyers)); got != units {
		t.Fatalf("after the rebuild: stock and in transit %d + buyers %d = %d units, want %d", state.Stock, len(state.Buyers), got, units)
	}
	if state.Stock != want {
		t.Errorf("after the rebuild: %d units to sell, want %d", state.Stock, want)
	}
	// Every window, restored or thawed, says the voucher's units, and the
	// stock read over the three masters counts by them.
	for b := range n {
		if got, _ := rdb.HGet(ctx, bucket(b).Window, "units").Int64(); got != units {
			t.Errorf("bucket %d's window says %d units, want %d", b, got, units)
		}
	}
	if got, err := res.RemainingStock(ctx, id); err != nil || got != want {
		t.Errorf("after the rebuild: the stock read answers %d, %v; want %d", got, err, want)
	}
	if _, err := res.RedriveTransfers(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Sell out: every unit once, and sold out only then.
	sold := int64(len(state.Buyers))
	for {
		r := buy()
		if r == core.VoucherMissing {
			t.Fatalf("user %d: voucher missing after its rebuild", user)
		}
		if r != core.Reserved {
			if r != core.SoldOut {
				t.Fatalf("user %d: %v", user, r)
			}
			break
		}
		sold++
	}
	if sold != units {
		t.Fatalf("sold %d units in all, want %d", sold, units)
	}
	for b := range n {
		if s := rdb.Get(ctx, bucket(b).Stock).Val(); s != "0" {
			t.Errorf("bucket %d has stock %s after sold out", b, s)
		}
	}
}
