package redisreserve

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

// TestTheCounterRisesPastTheDatabaseAfterRedisForgets: when Redis's
// incarnation changes, the worker drops its block and the day's counter
// first rises past the highest sequence the database holds (plus
// FloorMargin), so no id is handed out twice although Redis forgot the
// counter.
func TestTheCounterRisesPastTheDatabaseAfterRedisForgets(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	identity := NewIdentity("t:")
	identity.Attach(rdb)
	persisted := int64(0) // highest sequence "in the database"
	w := NewIDWorker(rdb, IDWorkerConfig{Prefix: "t:", BlockSize: 10, Identity: identity,
		Floor: func(context.Context, time.Time, int64, int64) (int64, error) { return persisted, nil }})
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return now }
	ctx := context.Background()
	seen := map[int64]bool{}
	take := func(n int) {
		for range n {
			id, err := w.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			seen[id] = true
			persisted = max(persisted, id&(1<<32-1))
		}
	}
	take(5)
	first := persisted
	if first <= FloorMargin {
		t.Fatalf("first sequence %d: the counter did not rise past the floor at start", first)
	}
	// Redis forgets the counter and comes back as another incarnation.
	mr.FlushAll()
	cur := "another run_id"
	identity.current.Store(&cur)
	identity.stale.Store(false)
	take(5)
	if persisted <= first+FloorMargin {
		t.Fatalf("after the loss the sequence went on at %d, want past %d", persisted, first+FloorMargin)
	}
}

// TestAForgettingIsANewIncarnationOnEveryInstance: part of the sale's state
// vanishing under an unchanged run_id (the day's counter evicted, say) is
// reported once, with Forget, on one instance. That instance's ID worker
// rises past the database at once, and another instance's identity on the
// same Redis tells the new incarnation at its next Refresh.
func TestAForgettingIsANewIncarnationOnEveryInstance(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	here, there := NewIdentity("t:"), NewIdentity("t:")
	here.Attach(rdb)
	there.Attach(rdb)
	ctx := context.Background()
	before, err := there.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	persisted := int64(0)
	w := NewIDWorker(rdb, IDWorkerConfig{Prefix: "t:", BlockSize: 10, Identity: here,
		Floor: func(context.Context, time.Time, int64, int64) (int64, error) { return persisted, nil }})
	first, err := w.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	persisted = first & (1<<32 - 1)
	mr.Del(Keys{Prefix: "t:"}.IDCounter(time.Now()))
	if _, err := here.Forget(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := w.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seq := next & (1<<32 - 1); seq <= persisted+FloorMargin {
		t.Fatalf("after the forgetting the sequence went on at %d, want past %d", seq, persisted+FloorMargin)
	}
	if cached, _ := there.Current(ctx); cached != before {
		t.Fatalf("the other instance's cached incarnation moved without a Refresh: %q", cached)
	}
	after, err := there.Refresh(ctx)
	if err != nil || after == before {
		t.Fatalf("the other instance's incarnation after Refresh: %q (%v), want other than %q", after, err, before)
	}
}

// TestALaneUsedUpMovesTheWorkerOnRisingPastTheDatabase: a lane whose day's
// counter cannot hold another block hands the worker to the next lane
// (idLaneStep on), whose ids carry that lane in their top bits, and whose
// counter first rises past the highest sequence of that lane the database
// holds: it may have been written before its master last restarted.
func TestALaneUsedUpMovesTheWorkerOnRisingPastTheDatabase(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	identity := NewIdentity("t:")
	identity.Attach(rdb)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	keys := Keys{Prefix: "t:"}
	const next = idLaneStep
	var asked [][2]int64
	floor := func(_ context.Context, day time.Time, lo, hi int64) (int64, error) {
		asked = append(asked, [2]int64{lo, hi})
		if lo == next*idLaneSize {
			return lo + 4242, nil // lane 5 holds orders up to counter 4242
		}
		return 0, nil
	}
	w := NewIDWorker(rdb, IDWorkerConfig{Prefix: "t:", BlockSize: 10, Identity: identity, Floor: floor})
	w.now = func() time.Time { return now }
	ctx := context.Background()
	first, err := w.NextID(ctx)
	if err != nil || first&(1<<32-1) != FloorMargin+1 {
		t.Fatalf("first id %d (sequence %d), %v: want lane 0, counter %d", first, first&(1<<32-1), err, FloorMargin+1)
	}
	// Lane 0 nearly used up: the block after the one in hand does not fit.
	if err := rdb.Set(ctx, keys.IDLane(now, 0), idLaneSize-5, 0).Err(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{first: true}
	var id int64
	for range 10 {
		if id, err = w.NextID(ctx); err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("id %d handed out twice", id)
		}
		seen[id] = true
	}
	seq := id & (1<<32 - 1)
	if lane, counter := seq>>(32-idLaneBits), seq&(idLaneSize-1); lane != next || counter != 4242+FloorMargin+1 {
		t.Fatalf("after lane 0 was used up: lane %d, counter %d; want lane %d, counter %d", lane, counter, next, 4242+FloorMargin+1)
	}
	if len(asked) != 2 || asked[1] != [2]int64{next * idLaneSize, (next+1)*idLaneSize - 1} {
		t.Fatalf("the floor was asked for %v; want lane 0's range, then lane %d's", asked, next)
	}
	if n, _ := rdb.Get(ctx, keys.IDLane(now, next)).Int64(); n != 4242+FloorMargin+10 {
		t.Fatalf("lane %d's counter %d, want %d", next, n, 4242+FloorMargin+10)
	}
}

// TestOneFullRedisKeepsTheWorkerOnItsLane: on one server every lane fails
// as the first did — here a Redis that refuses every write — so the worker
// neither moves nor asks the database for another lane's floor: a refill
// fails at the cost of one try (the lab's "Redis full, volatile-lru" row
// stalled for minutes when each refill walked all 16 lanes, asking MySQL
// at each, under the worker's lock).
func TestOneFullRedisKeepsTheWorkerOnItsLane(t *testing.T) {
	if testing.Short() {
		t.Skip("a Redis of the test's own: skipped in -short mode")
	}
	p := redistopology.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p.Port)})
	defer rdb.Close()
	ctx := context.Background()
	identity := NewIdentity("t:")
	identity.Attach(rdb)
	floors := 0
	w := NewIDWorker(rdb, IDWorkerConfig{Prefix: "t:", BlockSize: 10, Identity: identity,
		Floor: func(context.Context, time.Time, int64, int64) (int64, error) { floors++; return 0, nil }})
	if _, err := w.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, Keys{Prefix: "t:"}.IDCounter(time.Now())).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := identity.Forget(ctx); err == nil {
		t.Fatal("Forget wrote its mark into a Redis that refuses writes")
	}
	cur := "another incarnation" // as the next look would find it
	identity.current.Store(&cur)
	floors = 0
	for range 3 {
		if id, err := w.NextID(ctx); err == nil || !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("NextID on a full Redis: %d, %v; want the OOM error", id, err)
		}
	}
	if w.lane != 0 || floors != 3 {
		t.Fatalf("after three refills on a full Redis: lane %d, %d floors asked; want lane 0 and one floor each", w.lane, floors)
	}
}
