package redisroom

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/room"
)

// roomVoucher is a room voucher whose sale begins after lead: the early
// joins go in before it.
func roomVoucher(t *testing.T, id int64, rate int, ttl, lead time.Duration) core.Voucher {
	t.Helper()
	seed, err := core.NewRoomSeed()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	return core.Voucher{ID: id, Stock: 100, BeginAt: now.Add(lead), EndAt: now.Add(time.Hour),
		Room: &core.Room{OpensAt: now.Add(-time.Minute), AdmitPerSecond: rate, AdmissionTTL: ttl, Seed: seed}}
}

func newBoard(t *testing.T, r testenv.Redis) *Board {
	t.Helper()
	shards, err := core.NewShards("s0", "s1", "s2")
	if err != nil {
		t.Fatal(err)
	}
	return New(r.Client, r.Prefix, shards)
}

// passes reads a room's recorded admission passes, in order:
// {from, to, at}.
func passes(t *testing.T, b *Board, voucherID int64) [][3]int64 {
	t.Helper()
	_, _, _, admitted, _ := b.keys(voucherID)
	members, err := b.rdb.ZRange(context.Background(), admitted, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([][3]int64, len(members))
	for i, m := range members {
		f := strings.Split(m, ":")
		for j := range 3 {
			out[i][j], _ = strconv.ParseInt(f[j], 10, 64)
		}
	}
	return out
}

func waitUntil(t time.Time) { time.Sleep(time.Until(t) + 20*time.Millisecond) }

// drawAndPlace makes v's draw as the server does (room.Rooms): the early
// set closed once the sale has begun, its joiners ordered by their keys,
// the positions written.
func drawAndPlace(t *testing.T, b *Board, v core.Voucher) []room.DrawEntry {
	t.Helper()
	set, closed, err := b.Close(context.Background(), v)
	if err != nil || !closed {
		t.Fatalf("close: closed %v, %v", closed, err)
	}
	draw := room.Order(*v.Room, v.Room.Seed, set.Users)
	if err := b.Place(context.Background(), v, draw); err != nil {
		t.Fatal(err)
	}
	return draw
}

// TestTheDrawOrdersEarlyJoinersByTheirKeysAndLaterOnesByArrival: before
// the begin Redis holds the early joiners by arrival only (the security
// review read the published order from ZRANGE of the early set); nobody
// is admitted until the draw's positions are written; then the early
// joiners' places are their draw keys' ranks (recomputed here from the
// seed), those who join after the opening queue behind in arrival order,
// and no join, repeated, moves a place.
func TestTheDrawOrdersEarlyJoinersByTheirKeysAndLaterOnesByArrival(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		b := newBoard(t, r)
		v := roomVoucher(t, 41, 10, time.Minute, 700*time.Millisecond)
		const early = 150
		arrival := make([]string, 0, early)
		for k := int64(0); k < early; k++ {
			u := 1 + (k*37)%early // arrivals in an order of their own
			arrival = append(arrival, strconv.FormatInt(u, 10))
			if err := b.Join(ctx, v, u, -1); err != nil {
				t.Fatal(err)
			}
		}
		if seat, err := b.Seat(ctx, v, 7); err != nil || !seat.Joined || seat.Position != 0 {
			t.Fatalf("an early joiner before the opening: %+v, %v; want joined without a position", seat, err)
		}
		_, earlyKey, _, _, _ := b.keys(v.ID)
		if held, err := r.Client.ZRange(ctx, earlyKey, 0, -1).Result(); err != nil || !slices.Equal(held, arrival) {
			t.Fatalf("Redis holds the early joiners as %v (%v), want their ids by arrival only", held[:min(5, len(held))], err)
		}
		if _, closed, err := b.Close(ctx, v); closed || err != nil {
			t.Fatalf("the early set closed before the opening (%v)", err)
		}
		waitUntil(v.BeginAt)
		for u := int64(early + 1); u <= early+20; u++ {
			if err := b.Join(ctx, v, u, -1); err != nil {
				t.Fatal(err)
			}
		}
		if p, err := b.Advance(ctx, v, 100, -1); err != nil || p.Admitted != 0 || p.Unplaced != early || p.Drawn != early {
			t.Fatalf("a pass before the draw's positions are written: %+v, %v; want none admitted, %d unplaced", p, err, early)
		}
		draw := drawAndPlace(t, b, v)
		keys := make([]string, len(draw))
		for i, e := range draw {
			keys[i] = e.Key
		}
		want := make([]string, 0, early)
		for u := int64(1); u <= early; u++ {
			want = append(want, room.DrawKey(*v.Room, u))
		}
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Fatal("the draw's keys are not the early joiners' keys recomputed from the seed, in ascending order")
		}
		// Round 1 re-joins everyone first; round 2 after an admission pass.
		for round := range 3 {
			if round == 2 {
				if p, err := b.Advance(ctx, v, 100, early); err != nil || p.Unplaced != 0 {
					t.Fatalf("the pass once the positions are written: %+v, %v", p, err)
				}
			}
			for u := int64(1); u <= early+20; u++ {
				if round == 1 {
					if err := b.Join(ctx, v, u, -1); err != nil {
						t.Fatal(err)
					}
				}
				seat, err := b.Seat(ctx, v, u)
				if err != nil {
					t.Fatal(err)
				}
				wantPos := int64(slices.Index(keys, room.DrawKey(*v.Room, u)) + 1)
				if u > early {
					wantPos = u
				}
				if !seat.Joined || seat.Position != wantPos {
					t.Fatalf("round %d: shopper %d at %d (joined %v), want %d", round, u, seat.Position, seat.Joined, wantPos)
				}
			}
		}
		if seat, _ := b.Seat(ctx, v, 999); seat.Joined {
			t.Fatal("a shopper who never joined has a place")
		}
	})
}

// TestTwoAdmittersNeverAdmitPastTheRateOrTwice: two instances (two
// clients) make admission passes over one room as fast as they can; the
// passes recorded cover the positions once each, in order, and never get
// ahead of the rate since the opening.
func TestTwoAdmittersNeverAdmitPastTheRateOrTwice(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		// Two boards on the client's pool: their passes run on connections
		// of their own, interleaved by Redis as two instances' would be.
		boards := []*Board{newBoard(t, r), newBoard(t, r)}
		const rate = 40
		v := roomVoucher(t, 42, rate, time.Minute, 300*time.Millisecond)
		for u := int64(1); u <= 400; u++ {
			if err := boards[0].Join(ctx, v, u, -1); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(v.BeginAt)
		drawAndPlace(t, boards[1], v)
		var wg sync.WaitGroup
		stop := time.Now().Add(1500 * time.Millisecond)
		for _, b := range boards {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					if _, err := b.Advance(ctx, v, 100, 400); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		next := int64(1)
		for _, p := range passes(t, boards[0], v.ID) {
			from, to, at := p[0], p[1], p[2]
			if from != next || to < from {
				t.Fatalf("pass %d..%d after %d: positions skipped or admitted twice", from, to, next-1)
			}
			if allowed := rate * (at - v.BeginAt.UnixMilli()) / 1000; to > allowed+1 {
				t.Fatalf("%d admitted %d ms after the opening: the rate allows %d", to, at-v.BeginAt.UnixMilli(), allowed)
			}
			next = to + 1
		}
		if next-1 < rate { // 1.5 s at 40/s, less the scheduling's slack
			t.Fatalf("only %d admitted in 1.5 s at %d/s", next-1, rate)
		}
	})
}

// TestALapsedAdmissionAdmitsOneMore: an admission not used within its
// lifetime is a no-show and admits one more place beyond the rate; a used
// one is not; and the lapsed shopper's join puts them at the back.
func TestALapsedAdmissionAdmitsOneMore(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		b := newBoard(t, r)
		v := roomVoucher(t, 43, 2, 300*time.Millisecond, 100*time.Millisecond)
		for u := int64(1); u <= 30; u++ {
			if err := b.Join(ctx, v, u, -1); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(v.BeginAt.Add(time.Second))
		drawAndPlace(t, b, v)
		p, err := b.Advance(ctx, v, 100, 30)
		if err != nil || p.Admitted != 2 {
			t.Fatalf("the first pass a second in: %+v, %v; want 2 admitted (the burst)", p, err)
		}
		used := passes(t, b, v.ID)[0][0] // the first admitted position buys
		if err := b.Use(ctx, v, used); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond) // past the lifetime: one lapsed unused
		p, err = b.Advance(ctx, v, 100, 30)
		if err != nil || p.NoShows != 1 {
			t.Fatalf("after the lifetime: %+v, %v; want one no-show", p, err)
		}
		// 0.4 s at 2/s is no whole place: what this pass admitted is the
		// no-show's.
		if p.Admitted < 1 || p.Frontier != 2+p.Admitted {
			t.Fatalf("the no-show's pass admitted %d (frontier %d), want at least its one", p.Admitted, p.Frontier)
		}
		// The lapsed shopper is out of their place: a join queues again.
		var lapsedUser int64
		for u := int64(1); u <= 30; u++ {
			if seat, _ := b.Seat(ctx, v, u); seat.Position == used+1 {
				lapsedUser = u
			}
		}
		if err := b.Join(ctx, v, lapsedUser, -1); err != nil {
			t.Fatal(err)
		}
		if seat, _ := b.Seat(ctx, v, lapsedUser); seat.Position != 31 {
			t.Fatalf("a lapsed shopper re-joined at %d, want 31 (the back)", seat.Position)
		}
	})
}

// TestSoldOutStopsAdmissionAndReturnedUnitsResumeIt.
func TestSoldOutStopsAdmissionAndReturnedUnitsResumeIt(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		b := newBoard(t, r)
		v := roomVoucher(t, 44, 50, time.Minute, 100*time.Millisecond)
		for u := int64(1); u <= 200; u++ {
			if err := b.Join(ctx, v, u, -1); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(v.BeginAt.Add(200 * time.Millisecond))
		drawAndPlace(t, b, v)
		first, err := b.Advance(ctx, v, 100, 200)
		if err != nil || first.Admitted == 0 {
			t.Fatalf("first pass: %+v, %v", first, err)
		}
		time.Sleep(300 * time.Millisecond)
		soldOutAt := time.Now()
		out, err := b.Advance(ctx, v, 0, 200)
		if err != nil || !out.SoldOut || out.Admitted != 0 || out.SoldOutAt.IsZero() {
			t.Fatalf("a pass with no unit left: %+v, %v; want sold out, none admitted", out, err)
		}
		seat, err := b.Seat(ctx, v, waitingShopper(t, b, v, out.Frontier))
		if err != nil || !seat.SoldOut {
			t.Fatalf("a waiting shopper's seat after sold out: %+v, %v", seat, err)
		}
		time.Sleep(300 * time.Millisecond)
		back, err := b.Advance(ctx, v, 1, 200)
		if err != nil || back.SoldOut {
			t.Fatalf("a unit came back: %+v, %v", back, err)
		}
		time.Sleep(200 * time.Millisecond)
		again, err := b.Advance(ctx, v, 1, 200)
		if err != nil || again.Frontier <= out.Frontier {
			t.Fatalf("after a unit came back: frontier %d, was %d (%v): the room does not admit again", again.Frontier, out.Frontier, err)
		}
		// From the sold-out pass on, at most the rate: the time before it
		// (and the second of burst it would have saved) is not banked.
		if allowed := int64(50*time.Since(soldOutAt).Milliseconds()/1000) + 1; again.Frontier-out.Frontier > allowed {
			t.Fatalf("after a unit came back %d admitted, the rate allows %d since the sell-out: burst was banked", again.Frontier-out.Frontier, allowed)
		}
	})
}

// waitingShopper finds a shopper whose place is past frontier.
func waitingShopper(t *testing.T, b *Board, v core.Voucher, frontier int64) int64 {
	t.Helper()
	for u := int64(1); u <= 200; u++ {
		if seat, err := b.Seat(context.Background(), v, u); err == nil && seat.Position > frontier {
			return u
		}
	}
	t.Fatal("nobody waits")
	return 0
}

// TestJoinOutsideTheRoomsHoursIsRefused.
func TestJoinOutsideTheRoomsHoursIsRefused(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		b := newBoard(t, r)
		v := roomVoucher(t, 45, 5, time.Minute, time.Hour)
		v.Room.OpensAt = time.Now().Add(time.Minute)
		if err := b.Join(ctx, v, 1, -1); !errors.Is(err, core.ErrNotStarted) {
			t.Fatalf("a join before the room opens: %v, want not started", err)
		}
		v.Room.OpensAt, v.BeginAt, v.EndAt = time.Now().Add(-time.Hour), time.Now().Add(-time.Minute), time.Now().Add(-time.Second)
		if err := b.Join(ctx, v, 1, -1); !errors.Is(err, core.ErrEnded) {
			t.Fatalf("a join after the sale: %v, want ended", err)
		}
	})
}

// TestADrawLargerThanOneCallIsPlacedWholeBeforeAnyAdmission: a draw
// larger than one script call writes (placeChunk) is written over several
// calls; a pass between them admits nobody; every written position is the
// key's rank, and a position given at the back to a lapsed early joiner
// is never overwritten.
func TestADrawLargerThanOneCallIsPlacedWholeBeforeAnyAdmission(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		b := newBoard(t, r)
		v := roomVoucher(t, 47, 10, time.Minute, time.Hour)
		n := int64(placeChunk*2 + 500)
		_, early, places, _, _ := b.keys(v.ID)
		pipe := b.rdb.Pipeline()
		for u := int64(1); u <= n; u++ {
			pipe.ZAdd(ctx, early, redis.Z{Score: float64(u), Member: u})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		// Shopper 1 already has a place at the back (a lapsed admission).
		if err := b.rdb.HSet(ctx, places, 1, n+1).Err(); err != nil {
			t.Fatal(err)
		}
		v.BeginAt = time.Now().Add(-time.Second)
		set, closed, err := b.Close(ctx, v)
		if err != nil || !closed || int64(len(set.Users)) != n || set.Late < 500*time.Millisecond {
			t.Fatalf("close: %d joiners, closed %v, %v late, %v", len(set.Users), closed, set.Late, err)
		}
		draw := room.Order(*v.Room, v.Room.Seed, set.Users)
		// A placer that died after its first call.
		state, _, _, _, _ := b.keys(v.ID)
		args := []any{n, time.Now().Add(time.Hour).UnixMilli()}
		for i, e := range draw[:placeChunk] {
			args = append(args, e.UserID, i+1)
		}
		if err := b.place.Run(ctx, b.rdb, []string{state, early, places}, args...).Err(); err != nil {
			t.Fatal(err)
		}
		if p, err := b.Advance(ctx, v, 100, n); err != nil || p.Admitted != 0 || p.Unplaced != n-placeChunk {
			t.Fatalf("a pass with the draw part written: %+v, %v; want none admitted, %d unplaced", p, err, n-placeChunk)
		}
		if err := b.Place(ctx, v, draw); err != nil {
			t.Fatal(err)
		}
		got, err := b.rdb.HGetAll(ctx, places).Result()
		if err != nil || int64(len(got)) != n {
			t.Fatalf("%d positions written (%v), want %d", len(got), err, n)
		}
		for i, e := range draw {
			if e.UserID != 1 && got[strconv.FormatInt(e.UserID, 10)] != strconv.Itoa(i+1) {
				t.Fatalf("shopper %d written at %s, the draw says %d", e.UserID, got[strconv.FormatInt(e.UserID, 10)], i+1)
			}
		}
		if got["1"] != strconv.FormatInt(n+1, 10) {
			t.Fatalf("the place given at the back was overwritten: %s", got["1"])
		}
		if p, err := b.Advance(ctx, v, 100, n); err != nil || p.Unplaced != 0 || p.Admitted == 0 {
			t.Fatalf("the pass once the draw is written (a second after the begin: the rate's burst): %+v, %v", p, err)
		}
	})
}

// TestARestoredDrawGivesEveryPlaceBack: after the room's keys are lost, a
// join that knows the kept draw's size queues behind it, a pass admits
// nobody until the kept draw is placed again (over several calls), and
// every early joiner gets their place back, beside the place the later
// joiner was given.
func TestARestoredDrawGivesEveryPlaceBack(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		b := newBoard(t, r)
		// The joins go in before the begin, from 16 shoppers' connections
		// at once: one after another they took more than the 2 s lead
		// this test had on a loaded CI machine (1,126 of 1,200 early).
		v := roomVoucher(t, 48, 10, time.Minute, 4*time.Second)
		const early = placeChunk + 200
		joins := make(chan int64)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for u := range joins {
					if err := b.Join(ctx, v, u, -1); err != nil {
						t.Error(err)
					}
				}
			})
		}
		for u := int64(1); u <= early; u++ {
			joins <- u
		}
		close(joins)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if late := time.Since(v.BeginAt); late >= 0 {
			t.Fatalf("the early joins ended %v after the begin: the test's lead is too short for this machine", late)
		}
		waitUntil(v.BeginAt)
		draw := drawAndPlace(t, b, v)
		if p, err := b.Advance(ctx, v, 100, early); err != nil || p.Unplaced != 0 {
			t.Fatalf("the first pass: %+v, %v", p, err)
		}
		state, earlyK, places, admitted, used := b.keys(v.ID)
		for _, k := range []string{state, earlyK, places, admitted, used} {
			r.Client.Del(ctx, k)
		}
		if err := b.Join(ctx, v, 99_999, early); err != nil {
			t.Fatal(err)
		}
		if p, err := b.Advance(ctx, v, 100, early); err != nil || p.Admitted != 0 || p.Unplaced != early {
			t.Fatalf("a pass after the loss, before the restore: %+v, %v; want none admitted, all unplaced", p, err)
		}
		if err := b.Place(ctx, v, draw); err != nil {
			t.Fatal(err)
		}
		for i, e := range draw {
			if i%97 != 0 && i != len(draw)-1 {
				continue
			}
			if seat, err := b.Seat(ctx, v, e.UserID); err != nil || seat.Position != int64(i+1) {
				t.Fatalf("shopper %d after the restore: %+v, %v; want position %d", e.UserID, seat, err, i+1)
			}
		}
		if seat, _ := b.Seat(ctx, v, 99_999); seat.Position != early+1 {
			t.Fatalf("the joiner after the loss is at %d, want %d", seat.Position, early+1)
		}
		if p, err := b.Advance(ctx, v, 100, early); err != nil || p.Drawn != early || p.Joined != early+1 || p.Unplaced != 0 {
			t.Fatalf("after the restore the pass reads %+v, %v", p, err)
		}
	})
}
