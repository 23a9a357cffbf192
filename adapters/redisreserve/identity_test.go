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
)

// TestAClusterIdentityOutlivesAMasterOutOfReach: with one master of a
// cluster down, a look at every master fails (Refresh) but leaves the
// identity as it was, so Current still answers for the masters in reach,
// and a Poll answers with what they say; when the master comes back (empty:
// a new run_id), its first new connection makes the identity another.
func TestAClusterIdentityOutlivesAMasterOutOfReach(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of the test's own: skipped in -short mode")
	}
	ctx := context.Background()
	cluster := redistopology.StartPartialCoverageCluster(t)
	prefix, rdb, identity := followedCluster(t, cluster)

	was, err := identity.Current(ctx)
	if err != nil || strings.Count(was, ",") != 2 {
		t.Fatalf("identity %q, %v: want three masters' run_ids", was, err)
	}
	down := cluster.Owner(t, redisreserve.Keys{Prefix: prefix}.Forgets()) // the forgetting's mark out of reach too
	cluster.Nodes[down].Stop()
	if _, err := identity.Refresh(ctx); err == nil {
		t.Fatal("Refresh answered with a master down; want an error")
	}
	if cur, err := identity.Current(ctx); err != nil || cur != was {
		t.Fatalf("Current with a master down: %q, %v; want %q as before", cur, err, was)
	}
	if cur, err := identity.Poll(ctx); err != nil || cur != was {
		t.Fatalf("Poll with a master down: %q, %v; want %q as before", cur, err, was)
	}

	cluster.Nodes[down].Start()
	cluster.WaitHealthy(t)
	// A command on the master that came back: a new connection to it.
	if err := rdb.Get(ctx, redisreserve.Keys{Prefix: prefix}.Forgets()).Err(); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	now, err := identity.Current(ctx)
	if err != nil || now == was || strings.Count(now, ",") != 2 {
		t.Fatalf("identity after the master came back empty: %q, %v; want three run_ids other than %q", now, err, was)
	}
}

// TestOneRedisOutOfReachLeavesNoIdentity: on one Redis (no cluster), a look
// that fails makes the identity stale: nothing runs on a server that may
// come back another under a proxy's open connections before it is known.
func TestOneRedisOutOfReachLeavesNoIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("a Redis of the test's own: skipped in -short mode")
	}
	ctx := context.Background()
	p := redistopology.StartRedisProcess(t)
	identity := redisreserve.NewIdentity("t" + testenv.RandomSuffix() + ":")
	opt, err := redis.ParseURL(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.OnConnect = identity.OnConnect
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	identity.Attach(rdb)
	if _, err := identity.Current(ctx); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	if _, err := identity.Poll(ctx); err == nil {
		t.Fatal("Poll answered with Redis down")
	}
	if cur, err := identity.Current(ctx); err == nil {
		t.Fatalf("Current answered %q after a failed look with Redis down; want an error", cur)
	}
}

// TestTheIDWorkerMovesOffALaneOnAMasterOutOfReach: on a cluster, the ID
// worker's lanes live on every master; with lane 0's master down, ids come
// from a lane of another master, none twice.
func TestTheIDWorkerMovesOffALaneOnAMasterOutOfReach(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of the test's own: skipped in -short mode")
	}
	ctx := context.Background()
	cluster := redistopology.StartPartialCoverageCluster(t)
	opt, err := redis.ParseClusterURL(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClusterClient(opt)
	t.Cleanup(func() { rdb.Close() })
	prefix := "t" + testenv.RandomSuffix() + ":"
	w := redisreserve.NewIDWorker(rdb, redisreserve.IDWorkerConfig{Prefix: prefix, BlockSize: 1})
	seen := map[int64]bool{}
	take := func(n int) int64 {
		var id int64
		for range n {
			if id, err = w.NextID(ctx); err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			seen[id] = true
		}
		return id
	}
	if seq := take(3) & (1<<32 - 1); seq != 3 {
		t.Fatalf("third id's sequence %d, want 3 (lane 0)", seq)
	}
	down := cluster.Owner(t, redisreserve.Keys{Prefix: prefix}.IDLane(time.Now(), 0))
	cluster.Nodes[down].Stop()
	seq := take(3) & (1<<32 - 1)
	lane := int(seq >> 28)
	if lane == 0 {
		t.Fatalf("sequence %d with lane 0's master down: want another lane", seq)
	}
	if on := cluster.Owner(t, redisreserve.Keys{Prefix: prefix}.IDLane(time.Now(), lane)); on == down {
		t.Fatalf("lane %d is on the master that is down", lane)
	}
}
