package streamgroup_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// testLiveness is the tests' heartbeat window: a process that runs no
// duties is dead this long after it started.
const testLiveness = 300 * time.Millisecond

func newQueue(t *testing.T, r testenv.Redis, consumerPrefix string, minIdle time.Duration) *streamgroup.Queue {
	t.Helper()
	return newQueueWith(t, r, streamgroup.Config{ConsumerPrefix: consumerPrefix, ClaimMinIdle: minIdle, Liveness: testLiveness})
}

func newQueueWith(t *testing.T, r testenv.Redis, cfg streamgroup.Config) *streamgroup.Queue {
	t.Helper()
	cfg.Stream = r.Prefix + "orders"
	cfg.ClaimInterval, cfg.Block = 10*time.Millisecond, 50*time.Millisecond
	q, err := streamgroup.New(context.Background(), r.Client, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// runDuties runs q's duties (the claimer among them) until the test ends,
// as the pipeline would.
func runDuties(t *testing.T, q *streamgroup.Queue) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { core.RunQueueDuties(ctx, q, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func consumer(t *testing.T, q *streamgroup.Queue, i int) core.Consumer {
	t.Helper()
	c, err := q.Consumer(context.Background(), i)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func publish(t *testing.T, r testenv.Redis, q *streamgroup.Queue, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		body := core.EncodeOrder(core.Order{ID: id, UserID: id, VoucherID: 1, CreatedAt: time.Now()})
		if err := r.Client.XAdd(context.Background(), &redis.XAddArgs{
			Stream: q.Stream(), Values: []any{streamgroup.BodyField, body},
		}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// fetchN fetches until n deliveries arrived or a deadline passed.
func fetchN(t *testing.T, c core.Consumer, n int) []core.Delivery {
	t.Helper()
	var got []core.Delivery
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		ds, err := c.Fetch(context.Background(), n-len(got))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ds...)
	}
	if len(got) != n {
		t.Fatalf("fetched %d deliveries, want %d", len(got), n)
	}
	return got
}

func orderIDs(t *testing.T, ds []core.Delivery) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for _, d := range ds {
		o, err := core.DecodeOrder(d.Body)
		if err != nil {
			t.Fatalf("delivery %s: %v", d.ID, err)
		}
		out[o.ID] = d.Attempt
	}
	return out
}

func pendingCount(t *testing.T, r testenv.Redis, q *streamgroup.Queue) int64 {
	t.Helper()
	p, err := r.Client.XPending(context.Background(), q.Stream(), q.Config().Group).Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

// Classic bug: no group at start, and every XREADGROUP fails with NOGROUP.
// Entries added before the first consumer ran must be delivered too.
func TestGroupIsCreatedAtStartAndSeesEarlierEntries(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := newQueue(t, r, "p", time.Minute)
		publish(t, r, q, 1, 2)
		// A second New on the same stream meets BUSYGROUP and is fine.
		q2 := newQueue(t, r, "p2", time.Minute)
		ds := fetchN(t, consumer(t, q2, 0), 2)
		if ids := orderIDs(t, ds); ids[1] != 1 || ids[2] != 1 {
			t.Fatalf("got %v, want orders 1 and 2 on their first attempt", ids)
		}
	})
}

// TestTheLagOfAGroupThatReadNothingIsTheBacklogsAge: a group made before
// its first entry says 0-0 delivered; its lag is measured from the first
// entry (the dashboard showed 56 years).
func TestTheLagOfAGroupThatReadNothingIsTheBacklogsAge(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := newQueue(t, r, "p", time.Minute)
		publish(t, r, q, 1, 1)
		time.Sleep(20 * time.Millisecond)
		publish(t, r, q, 2, 2)
		s, err := q.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if s.Lag < 15*time.Millisecond || s.Lag > time.Minute {
			t.Fatalf("lag %v with nothing delivered, want the 20 ms between the entries", s.Lag)
		}
	})
}

// Classic bug: XACK on another key than the one read, leaving every entry
// pending forever.
func TestAckClearsPendingOnTheStreamRead(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := newQueue(t, r, "p", time.Minute)
		c := consumer(t, q, 0)
		publish(t, r, q, 1, 2, 3)
		ds := fetchN(t, c, 3)
		if n := pendingCount(t, r, q); n != 3 {
			t.Fatalf("pending before ack = %d, want 3", n)
		}
		if err := c.Ack(context.Background(), ds); err != nil {
			t.Fatal(err)
		}
		if n := pendingCount(t, r, q); n != 0 {
			t.Fatalf("pending after ack = %d, want 0", n)
		}
		if err := c.Ack(context.Background(), ds); err != nil {
			t.Fatalf("acking twice: %v", err)
		}
	})
}

// A dead consumer is another process's (one that runs no duties): a
// consumer of this process holding entries is working on them, and is
// never claimed from (TestConformance's FetchNeverReturnsWhatTheProcessHolds).
func TestEntriesOfADeadConsumerAreClaimed(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		died := newQueue(t, r, "died", 200*time.Millisecond)
		q := newQueue(t, r, "p", 200*time.Millisecond)
		runDuties(t, q)
		dead, alive := consumer(t, died, 0), consumer(t, q, 1)
		publish(t, r, q, 1, 2)
		fetchN(t, dead, 2) // and never acks: it died holding them
		ds := fetchN(t, alive, 2)
		ids := orderIDs(t, ds)
		if ids[1] != 2 || ids[2] != 2 {
			t.Fatalf("claimed %v, want orders 1 and 2 on their second attempt", ids)
		}
		if err := alive.Ack(context.Background(), ds); err != nil {
			t.Fatal(err)
		}
		if n := pendingCount(t, r, q); n != 0 {
			t.Fatalf("pending = %d after the claimer acked, want 0", n)
		}
	})
}

// Classic bug: a restarted process reads only new entries (">") under a new
// consumer name, and what the old name held stays pending forever.
func TestRestartUnderANewNameDoesNotStrandPendingEntries(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		before := newQueue(t, r, "host-1-aaa", 200*time.Millisecond)
		publish(t, r, before, 1, 2, 3)
		fetchN(t, consumer(t, before, 0), 3)

		after := newQueue(t, r, "host-2-bbb", 200*time.Millisecond)
		runDuties(t, after)
		ds := fetchN(t, consumer(t, after, 0), 3)
		if ids := orderIDs(t, ds); len(ids) != 3 {
			t.Fatalf("the restarted process got %v, want the 3 stranded orders", ids)
		}
	})
}

// With a stable consumer name the restarted process takes its own pending
// entries back at once, without waiting for the claim idle time.
func TestRestartUnderTheSameNameTakesBackItsPendingAtOnce(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		before := newQueue(t, r, "pod-0", time.Hour)
		publish(t, r, before, 1, 2)
		fetchN(t, consumer(t, before, 0), 2)

		after := newQueue(t, r, "pod-0", time.Hour)
		ds := fetchN(t, consumer(t, after, 0), 2)
		if ids := orderIDs(t, ds); ids[1] != 2 || ids[2] != 2 {
			t.Fatalf("got %v, want orders 1 and 2 again, second attempt", ids)
		}
	})
}

func TestDeadLetterMovesTheEntryAndAcksIt(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := newQueue(t, r, "p", time.Minute)
		c := consumer(t, q, 0)
		publish(t, r, q, 7)
		ds := fetchN(t, c, 1)
		if err := c.DeadLetter(context.Background(), ds[0], "poison: test"); err != nil {
			t.Fatal(err)
		}
		if n := pendingCount(t, r, q); n != 0 {
			t.Fatalf("pending = %d, want 0: a dead-lettered entry is acked", n)
		}
		dead, err := r.Client.XRange(context.Background(), q.Config().DeadLetterStream, "-", "+").Result()
		if err != nil || len(dead) != 1 {
			t.Fatalf("dead-letter stream has %d entries (%v), want 1", len(dead), err)
		}
		v := dead[0].Values
		if v["source_id"] != ds[0].ID || v["reason"] != "poison: test" || v[streamgroup.BodyField] != string(ds[0].Body) {
			t.Fatalf("dead letter = %v, want the source id, reason and body", v)
		}
	})
}

func TestTrimNeverDropsUnacknowledgedEntries(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q, err := streamgroup.New(context.Background(), r.Client, streamgroup.Config{
			Stream: r.Prefix + "orders", ConsumerPrefix: "p", TrimRetention: -1, Block: 50 * time.Millisecond,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := consumer(t, q, 0)
		publish(t, r, q, 1, 2, 3, 4, 5, 6)
		ds := fetchN(t, c, 4) // 1-4 delivered, 5 and 6 not yet
		// Ack 1, 2 and 4; 3 stays pending.
		if err := c.Ack(context.Background(), []core.Delivery{ds[0], ds[1], ds[3]}); err != nil {
			t.Fatal(err)
		}
		removed, err := q.Trim(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		left, err := r.Client.XRange(context.Background(), q.Stream(), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		var kept []int64
		for _, m := range left {
			o, _ := core.DecodeOrder([]byte(m.Values[streamgroup.BodyField].(string)))
			kept = append(kept, o.ID)
		}
		if removed != 2 || len(kept) != 4 || kept[0] != 3 {
			t.Fatalf("trim removed %d and kept %v, want 2 removed and 3,4,5,6 kept", removed, kept)
		}
	})
}

// If the stream disappears (FLUSHALL, an operator's DEL) consumers
// recreate the group instead of failing with NOGROUP forever.
func TestConsumersSurviveTheStreamBeingDeleted(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := newQueue(t, r, "p", time.Minute)
		c := consumer(t, q, 0)
		publish(t, r, q, 1)
		fetchN(t, c, 1)
		r.Client.Del(context.Background(), q.Stream())
		// The first fetch may report the missing group; the next recover.
		c.Fetch(context.Background(), 10)
		publish(t, r, q, 2)
		ds := fetchN(t, c, 1)
		if ids := orderIDs(t, ds); ids[2] != 1 {
			t.Fatalf("after the stream was deleted got %v, want order 2", ids)
		}
	})
}

func TestFetchReturnsWhenContextIsCancelled(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := newQueue(t, r, "p", time.Minute)
		c := consumer(t, q, 0)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Fetch(ctx, 10); err == nil {
			t.Fatal("Fetch on a cancelled context returned no error")
		}
	})
}

// TestEntriesDeliveredWithALostReplyAreFetchedAgain: XREADGROUP delivered
// entries to a consumer's name in Redis and its reply never came back (a
// reset, a Redis restart, a timeout). They are pending under a live
// consumer, which no claimer takes from (keepHeld would not touch them,
// but a claim only comes after ClaimMinIdle, a minute here): after the
// failed fetch the consumer reads its own pending entries again, skipping
// those it holds.
func TestEntriesDeliveredWithALostReplyAreFetchedAgain(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := newQueue(t, r, "p", time.Minute)
		c := consumer(t, q, 0)
		publish(t, r, q, 1)
		fetchN(t, c, 1) // order 1, fetched and held, not acked
		publish(t, r, q, 2, 3)
		// What the lost reply did.
		if err := r.Client.XReadGroup(context.Background(), &redis.XReadGroupArgs{
			Group: q.Config().Group, Consumer: "p-0", Streams: []string{q.Stream(), ">"}, Count: 10,
		}).Err(); err != nil {
			t.Fatal(err)
		}
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Fetch(cancelled, 10); err == nil {
			t.Fatal("a fetch on a cancelled context succeeded")
		}
		ids := orderIDs(t, fetchN(t, c, 2))
		if _, again := ids[1]; again || len(ids) != 2 {
			t.Fatalf("after the failed fetch: %v; want orders 2 and 3, not the held order 1", ids)
		}
	})
}

// TestEntriesStrandedUnderALiveConsumerAreAdopted: go-redis retries a
// command on a broken connection, so an XREADGROUP whose first try
// delivered entries and lost the reply can succeed on its second try: no
// error tells the consumer. The entries pend under its name, held by
// nobody; the claimer adopts them within seconds, not after ClaimMinIdle
// (a minute here), and they are fetched once.
func TestEntriesStrandedUnderALiveConsumerAreAdopted(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := newQueue(t, r, "p", time.Minute)
		runDuties(t, q)
		c := consumer(t, q, 0)
		// Its own pending entries (none) read once, as after a start.
		if ds, err := c.Fetch(context.Background(), 10); err != nil || len(ds) != 0 {
			t.Fatalf("first fetch of an empty stream: %v %v", ds, err)
		}
		publish(t, r, q, 1, 2)
		if err := r.Client.XReadGroup(context.Background(), &redis.XReadGroupArgs{
			Group: q.Config().Group, Consumer: "p-0", Streams: []string{q.Stream(), ">"}, Count: 10,
		}).Err(); err != nil {
			t.Fatal(err)
		}
		var got []core.Delivery
		deadline := time.Now().Add(10 * time.Second)
		for len(got) < 2 && time.Now().Before(deadline) {
			ds, err := c.Fetch(context.Background(), 10)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ds...)
		}
		if ids := orderIDs(t, got); len(got) != 2 || len(ids) != 2 {
			t.Fatalf("fetched %d deliveries of orders %v, want orders 1 and 2 once each", len(got), ids)
		}
		if ds, _ := c.Fetch(context.Background(), 10); len(ds) != 0 {
			t.Fatalf("fetched %d more while holding the adopted ones", len(ds))
		}
	})
}

// TestAVanishedStreamIsReportedAndRecreated: the stream deleted under the
// consumers (an operator, or an evicting Redis) took its orders and group
// with it. The consumer says so (Config.Forgotten, which the server turns
// into rebuilding the sale) and recreates the group, and orders added
// afterwards are delivered.
func TestAVanishedStreamIsReportedAndRecreated(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		var forgotten atomic.Int64
		q, err := streamgroup.New(context.Background(), r.Client, streamgroup.Config{
			Stream: r.Prefix + "orders", ConsumerPrefix: "p", Block: 50 * time.Millisecond,
			Forgotten: func() { forgotten.Add(1) },
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := consumer(t, q, 0)
		publish(t, r, q, 1)
		fetchN(t, c, 1)
		if err := r.Client.Del(context.Background(), q.Stream()).Err(); err != nil {
			t.Fatal(err)
		}
		publish(t, r, q, 2) // XADD makes a stream without the group
		got := fetchN(t, c, 1)
		if ids := orderIDs(t, got); len(ids) != 1 || ids[2] == 0 {
			t.Fatalf("after the stream vanished: %v, want order 2", ids)
		}
		if n := forgotten.Load(); n != 1 {
			t.Fatalf("Forgotten called %d times, want once", n)
		}
	})
}

// TestHeldOrdersReadsABacklogPageByPage: a backlog of several pages of
// never-delivered entries, and pending ones, are all reported held.
func TestHeldOrdersReadsABacklogPageByPage(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		q := newQueue(t, r, "held", time.Minute)
		ids := make([]int64, 2500)
		for i := range ids {
			ids[i] = int64(i + 1)
		}
		publish(t, r, q, ids...)
		delivered := fetchN(t, consumer(t, q, 0), 10) // pending, not acked
		held, err := q.HeldOrders(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		for _, o := range held {
			seen[o.ID] = true
		}
		if len(held) != len(ids) || len(seen) != len(ids) {
			t.Fatalf("held %d orders (%d distinct) with %d pending, want all %d once", len(held), len(seen), len(delivered), len(ids))
		}
	})
}

// Classic leak: consumers are never removed from the group (no XGROUP
// DELCONSUMER), so a deployment that rolls pods accumulates their names
// for ever. The pruner removes a consumer once it holds nothing and has
// been idle past the claim time — not one with entries pending (the
// claimer's to take), and not a live one.
func TestConsumersThatAreGoneAreRemovedFromTheGroup(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		const minIdle = 300 * time.Millisecond
		gone := newQueue(t, r, "gone", time.Hour) // its own duties never run
		held := newQueue(t, r, "held", time.Hour)
		q := newQueue(t, r, "live", minIdle)
		publish(t, r, q, 1, 2)
		done := consumer(t, gone, 0)
		ds := fetchN(t, done, 1)
		if err := done.Ack(context.Background(), ds); err != nil {
			t.Fatal(err)
		}
		fetchN(t, consumer(t, held, 0), 1) // dies holding order 2
		time.Sleep(max(minIdle, testLiveness) + 200*time.Millisecond)
		live := consumer(t, q, 0)
		live.Fetch(context.Background(), 1) // seen just now: nothing to fetch, but alive
		before := consumerNames(t, r, q)
		for _, d := range q.Capabilities().Duties {
			if d.Name == "prune consumers" {
				if err := d.Do(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		names := consumerNames(t, r, q)
		if r.Mini != nil {
			// miniredis does not track a consumer's idle time (XINFO
			// CONSUMERS says -1): unknown is never old enough, and nothing
			// is removed there.
			if len(names) != len(before) {
				t.Fatalf("consumers %v after pruning on the stand-in, want all of %v", names, before)
			}
			return
		}
		if _, ok := names["gone-0"]; ok {
			t.Errorf("the consumer that acked everything and went idle is still listed: %v", names)
		}
		if names["held-0"] != 1 {
			t.Errorf("the consumer holding an entry was removed (or lost it): %v", names)
		}
		if _, ok := names["live-0"]; !ok {
			t.Errorf("the live consumer was removed: %v", names)
		}
	})
}

// consumerNames are the group's consumers and what each has pending.
func consumerNames(t *testing.T, r testenv.Redis, q *streamgroup.Queue) map[string]int64 {
	t.Helper()
	infos, err := r.Client.XInfoConsumers(context.Background(), q.Stream(), q.Config().Group).Result()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int64{}
	for _, c := range infos {
		names[c.Name] = c.Pending
	}
	return names
}

// TestAKilledProcesssEntriesAreClaimedWithinTwoSeconds: the outside review
// killed a process with the default per-process consumer name; what it had
// been delivered waited SECKILL_CLAIM_MIN_IDLE (30 s) before another took
// it, and with a 5 s pay window 98 of 100 winners' orders expired still
// queued. A process that stops beating is dead after Liveness (1.2 s by
// default), and the next reap takes its entries: within 2 s of its death,
// with the claim idle time at 30 s.
func TestAKilledProcesssEntriesAreClaimedWithinTwoSeconds(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		killed := newQueueWith(t, r, streamgroup.Config{ConsumerPrefix: "killed", ClaimMinIdle: 30 * time.Second})
		ctx, kill := context.WithCancel(context.Background())
		beating := make(chan struct{})
		go func() { core.RunQueueDuties(ctx, killed, nil); close(beating) }()
		survivor := newQueueWith(t, r, streamgroup.Config{ConsumerPrefix: "survivor", ClaimMinIdle: 30 * time.Second})
		runDuties(t, survivor)
		publish(t, r, killed, 1, 2, 3)
		fetchN(t, consumer(t, killed, 0), 3)
		time.Sleep(2 * time.Second) // alive and holding them: nobody takes them
		live := consumer(t, survivor, 0)
		if ds, _ := live.Fetch(context.Background(), 10); len(ds) != 0 {
			t.Fatalf("the survivor took %d entries from a process that still beats", len(ds))
		}
		kill() // SIGKILL: no more beats, nothing acked
		<-beating
		died := time.Now()
		var got []core.Delivery
		for len(got) < 3 && time.Since(died) < 5*time.Second {
			ds, err := live.Fetch(context.Background(), 10)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ds...)
		}
		took := time.Since(died)
		if ids := orderIDs(t, got); len(ids) != 3 || ids[1] != 2 {
			t.Fatalf("the survivor got %v, want orders 1, 2, 3 on their second delivery", ids)
		}
		if took > 2*time.Second {
			t.Fatalf("the killed process's entries moved %v after its death, want within 2 s (the claim idle time is 30 s)", took)
		}
		t.Logf("claimed %v after the death", took.Round(10*time.Millisecond))
	})
}

// TestALiveConsumerOfAQuietStreamIsNeverPruned: on Redis 7.0 an empty
// blocking read does not reset a consumer's idle time, and the pruner
// removed the server's own live consumers every claim period, logging them
// as gone. A consumer whose process beats stays, however idle.
func TestALiveConsumerOfAQuietStreamIsNeverPruned(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		if r.Mini != nil {
			t.Skip("miniredis tracks no consumer's idle time (XINFO CONSUMERS says -1): it prunes nothing")
		}
		const minIdle = 300 * time.Millisecond
		q := newQueue(t, r, "quiet", minIdle)
		runDuties(t, q)
		c := consumer(t, q, 0)
		deadline := time.Now().Add(3 * minIdle)
		for time.Now().Before(deadline) {
			c.Fetch(context.Background(), 1) // empty blocking reads
		}
		for _, d := range q.Capabilities().Duties {
			if d.Name == "prune consumers" {
				if err := d.Do(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, ok := consumerNames(t, r, q)["quiet-0"]; !ok {
			t.Fatalf("the live consumer of a quiet stream was pruned: %v", consumerNames(t, r, q))
		}
	})
}
