package lab

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/redisroom"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/room"
	"github.com/seckill-lab/seckill/lua"
)

// The waiting room on the real Redis (`bench -only room`): what a join
// costs Redis against a bare ZADD (redis-benchmark, same run), what a poll
// costs as the room grows from 1,000 to 100,000 places, whether the draw's
// places are independent of the arrival order (Kendall's τ, a χ² test),
// and the share of units a fast scripted client takes with and without
// the room (bench_roombots.go).

// roomBench is the room's Redis and key space for one bench run.
type roomBench struct {
	rdb    *redis.Client
	url    string
	prefix string
	board  *redisroom.Board
	keys   func(voucherID int64) []string
	// joinSHA is room_join.lua's, loaded: fill pipelines it.
	joinSHA string
}

func (b *bench) newRoomBench() (*roomBench, error) {
	opts, err := redis.ParseURL(b.cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opts)
	prefix := "benchroom" + crand.Text()[:4] + ":"
	shards := redisreserve.SpreadShards(1)
	keys := func(id int64) []string {
		s := prefix + "room:{" + shards.TagOf(id) + "}:" + strconv.FormatInt(id, 10)
		return []string{s, s + ":early", s + ":places", s + ":admitted", s + ":used"}
	}
	sha, err := rdb.ScriptLoad(context.Background(), lua.RoomJoin).Result()
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &roomBench{rdb: rdb, url: b.cfg.RedisURL, prefix: prefix, board: redisroom.New(rdb, prefix, shards), keys: keys, joinSHA: sha}, nil
}

func (r *roomBench) close() {
	r.rdb.Close()
	dropKeys(r.url, r.prefix)
}

// roomOf is a room voucher of id whose sale begins at begin.
func roomOf(id int64, begin time.Time) core.Voucher {
	v := core.Voucher{ID: id, Stock: 100, BeginAt: begin, EndAt: begin.Add(time.Hour),
		Room: &core.Room{OpensAt: begin.Add(-time.Hour), AdmitPerSecond: 100, AdmissionTTL: time.Minute}}
	crand.Read(v.Room.Seed[:])
	return v
}

// roomCosts runs the Redis-side room measurements.
func (b *bench) roomCosts() ([]benchTarget, error) {
	r, err := b.newRoomBench()
	if err != nil {
		return nil, err
	}
	defer r.close()
	out, err := r.joinCost(b.conns)
	if err != nil {
		out = append(out, benchTarget{name: "room join ÷ bare ZADD, redis-benchmark", detail: "not run: " + err.Error()})
	}
	polls, err := r.pollCost()
	if err != nil {
		return nil, err
	}
	draw, err := r.drawFairness(10_000)
	if err != nil {
		return nil, err
	}
	return append(append(append(out, polls...), draw...), puzzleRate()), nil
}

// puzzleRate is what the join's proof of work (SECKILL_ROOM_POW_BITS)
// costs a native solver on one core of this machine: room.Solve, plain Go
// SHA-256, on twenty 20-bit challenges of the server's length.
func puzzleRate() benchTarget {
	progressf("bench: the join's proof of work, a native solver…")
	puzzle := room.NewPuzzle([]byte("bench"), 20)
	tries, start := 0, time.Now()
	for i := range 20 {
		n, _ := strconv.Atoi(room.Solve(puzzle.Challenge(int64(i+1), 123456789, start), 20))
		tries += n + 1
	}
	rate := float64(tries) / time.Since(start).Seconds()
	mean := float64(1<<20) / rate
	return benchTarget{name: "proof of work at 20 bits, native Go on one core: seconds a join (reported)", ratio: mean, measured: true,
		detail: fmt.Sprintf("%.0f hashes/s: %.0f places an hour per core (the storefront's solver: TestTheStorefrontSolvesTheRoomsPuzzle)", rate, 3600/mean)}
}

// joinCost sets redis-benchmark's EVALSHA of room_join.lua, before the
// opening (a join into the draw) and after it (a place at the back),
// against a bare ZADD of the same random members, in one run.
func (r *roomBench) joinCost(conns int) ([]benchTarget, error) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark is not on this machine")
	}
	sha := r.joinSHA
	run := func(args ...string) (float64, error) {
		progressf("bench: redis-benchmark %s…", args[0])
		return redisBenchmark(bin, r.rdb.Options().Addr, conns, args...)
	}
	join := func(v core.Voucher) (float64, error) {
		ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
		args := append([]string{"EVALSHA", sha, "5"}, r.keys(v.ID)...)
		return run(append(args, "__rand_int__", ms(v.Room.OpensAt), ms(v.BeginAt), ms(v.EndAt), "60000", ms(v.EndAt.Add(time.Hour)), "-1")...)
	}
	zadd, err := run("ZADD", r.prefix+"bare:{s0}", "0", "__rand_int__")
	if err != nil {
		return nil, err
	}
	early, err := join(roomOf(1, time.Now().Add(time.Hour)))
	if err != nil {
		return nil, err
	}
	late, err := join(roomOf(2, time.Now().Add(-time.Minute)))
	if err != nil {
		return nil, err
	}
	detail := func(rate float64) string {
		return fmt.Sprintf("%.0f ÷ %.0f req/s; %d connections, no pipelining, random users", rate, zadd, conns)
	}
	return []benchTarget{
		{name: "room join before the opening (the draw) ÷ bare ZADD, redis-benchmark", ratio: early / zadd, measured: true, detail: detail(early)},
		{name: "room join after the opening (at the back) ÷ bare ZADD, redis-benchmark", ratio: late / zadd, measured: true, detail: detail(late)},
	}, nil
}

// fill joins users 1..n into v's room, pipelined, in that order.
func (r *roomBench) fill(v core.Voucher, n int) error {
	ctx := context.Background()
	const batch = 1000
	for from := 1; from <= n; from += batch {
		pipe := r.rdb.Pipeline()
		for u := from; u < from+batch && u <= n; u++ {
			ms := func(t time.Time) int64 { return t.UnixMilli() }
			pipe.EvalSha(ctx, r.joinSHA, r.keys(v.ID), u, ms(v.Room.OpensAt), ms(v.BeginAt), ms(v.EndAt),
				60000, ms(v.EndAt.Add(time.Hour)), -1)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("fill a room: %w", err)
		}
	}
	return nil
}

// draw makes v's draw as the server does (room.Rooms): the early set
// closed, its joiners ordered by their keys, the positions written.
func (r *roomBench) draw(v core.Voucher) ([]room.DrawEntry, error) {
	ctx := context.Background()
	set, closed, err := r.board.Close(ctx, v)
	if err != nil || !closed {
		return nil, fmt.Errorf("close the early set: closed %v, %v", closed, err)
	}
	draw := room.Order(*v.Room, v.Room.Seed, set.Users)
	return draw, r.board.Place(ctx, v, draw)
}

// pollCost fills rooms of 1,000, 10,000 and 100,000 early joiners, makes
// their draws and polls random places after the opening from 16
// goroutines, in three rounds that rotate the rooms' order (this machine
// is noisy): the rate, and Redis's own time per call from INFO
// commandstats.
func (r *roomBench) pollCost() ([]benchTarget, error) {
	ctx := context.Background()
	sizes := []int{1_000, 10_000, 100_000}
	rooms := make([]core.Voucher, len(sizes))
	for i, n := range sizes {
		v := roomOf(int64(10+i), time.Now().Add(time.Hour))
		progressf("bench: a room of %d places…", n)
		if err := r.fill(v, n); err != nil {
			return nil, err
		}
		v.BeginAt = time.Now().Add(-time.Second)
		if _, err := r.draw(v); err != nil {
			return nil, err
		}
		if p, err := r.board.Advance(ctx, v, 1, int64(n)); err != nil || p.Joined != int64(n) || p.Unplaced != 0 {
			return nil, fmt.Errorf("the admission pass after the draw: %+v, %v", p, err)
		}
		rooms[i] = v
	}
	rates, usecs := make([][]float64, len(sizes)), make([][]float64, len(sizes))
	for round := range 3 {
		for k := range sizes {
			i := (round + k) % len(sizes)
			rate, usec, err := r.polls(rooms[i], sizes[i], 2*time.Second)
			if err != nil {
				return nil, err
			}
			progressf("bench:   round %d, %d places: %.0f polls/s, %.2f µs of Redis per poll", round+1, sizes[i], rate, usec)
			rates[i], usecs[i] = append(rates[i], rate), append(usecs[i], usec)
		}
	}
	m := func(xs [][]float64, i int) float64 { return medianOf(xs[i]) }
	detail := fmt.Sprintf("medians of 3 rounds; polls/s at 1k, 10k, 100k places: %.0f, %.0f, %.0f; Redis µs per poll: %.2f, %.2f, %.2f",
		m(rates, 0), m(rates, 1), m(rates, 2), m(usecs, 0), m(usecs, 1), m(usecs, 2))
	return []benchTarget{
		{name: "room poll rate at 100,000 places ÷ at 1,000 (flat: at least 0.8)", ratio: pairedRatio(rates[2], rates[0]), target: 0.8, measured: true, detail: detail},
		{name: "room poll, Redis's time per call at 100,000 places ÷ at 1,000 (at most 1.5)", ratio: pairedRatio(usecs[2], usecs[0]), target: -1.5, measured: true,
			detail: "INFO commandstats evalsha, over the same runs"},
	}, nil
}

// polls polls random places of v's n for d from 16 goroutines.
func (r *roomBench) polls(v core.Voucher, n int, d time.Duration) (rate, usecPerCall float64, err error) {
	ctx := context.Background()
	before := commandStats(r.rdb)["evalsha"]
	var done atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < d {
				seat, err := r.board.Seat(ctx, v, 1+rand.Int64N(int64(n)))
				if err == nil && (!seat.Joined || seat.Position < 1) {
					err = fmt.Errorf("a joined shopper read %+v", seat)
				}
				if err != nil {
					failed.Store(&err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		return 0, 0, *e
	}
	elapsed := time.Since(start)
	after := commandStats(r.rdb)["evalsha"]
	if after.calls <= before.calls {
		return 0, 0, fmt.Errorf("INFO commandstats counted no EVALSHA over the polls")
	}
	return float64(done.Load()) / elapsed.Seconds(), (after.usec - before.usec) / float64(after.calls-before.calls), nil
}

// drawFairness joins n shoppers before the opening in arrival order,
// reads their places from the published draw (each checked against a
// poll for a sample), and tests the places' independence of the arrival:
// Kendall's τ, and a χ² test of the 10×10 table of arrival decile by
// place decile.
func (r *roomBench) drawFairness(n int) ([]benchTarget, error) {
	ctx := context.Background()
	v := roomOf(99, time.Now().Add(time.Hour))
	progressf("bench: %d early joiners, then the draw…", n)
	if err := r.fill(v, n); err != nil {
		return nil, err
	}
	v.BeginAt = time.Now().Add(-time.Second)
	draw, err := r.draw(v)
	if err != nil || len(draw) != n {
		return nil, fmt.Errorf("the draw: %d keys, %v", len(draw), err)
	}
	rank := make(map[string]int, n)
	for i, e := range draw {
		rank[e.Key] = i + 1
	}
	places := make([]int, n) // places[arrival-1]
	for u := 1; u <= n; u++ {
		places[u-1] = rank[room.DrawKey(*v.Room, int64(u))]
		if u%(n/20) == 0 {
			if seat, err := r.board.Seat(ctx, v, int64(u)); err != nil || seat.Position != int64(places[u-1]) {
				return nil, fmt.Errorf("shopper %d: the poll says %d, the published draw %d (%v)", u, seat.Position, places[u-1], err)
			}
		}
	}
	tau := kendallTau(places)
	chi2, p := decileChiSquare(places)
	return []benchTarget{
		{name: fmt.Sprintf("draw: |Kendall τ| between arrival and place, %d early joiners (below 0.05)", n), ratio: math.Abs(tau), target: -0.05, measured: true,
			detail: fmt.Sprintf("τ = %+.4f (arrival order itself: τ = 1)", tau)},
		{name: "draw: χ² of arrival decile × place decile, p-value (above 0.01: no dependence found)", ratio: p, target: 0.01, measured: true,
			detail: fmt.Sprintf("χ² = %.1f, 81 degrees of freedom (Wilson–Hilferty)", chi2)},
	}, nil
}

// kendallTau is Kendall's τ between i and places[i] (a permutation of
// 1..n): 1 − 4·inversions / (n(n−1)), inversions counted by merge sort.
func kendallTau(places []int) float64 {
	a := slices.Clone(places)
	inv := countInversions(a, make([]int, len(a)))
	n := float64(len(a))
	return 1 - 4*float64(inv)/(n*(n-1))
}

func countInversions(a, buf []int) int64 {
	if len(a) < 2 {
		return 0
	}
	mid := len(a) / 2
	inv := countInversions(a[:mid], buf[:mid]) + countInversions(a[mid:], buf[mid:])
	i, j, k := 0, mid, 0
	for i < mid && j < len(a) {
		if a[i] <= a[j] {
			buf[k], i = a[i], i+1
		} else {
			buf[k], j = a[j], j+1
			inv += int64(mid - i)
		}
		k++
	}
	k += copy(buf[k:], a[i:mid])
	copy(buf[k:], a[j:])
	copy(a, buf[:len(a)])
	return inv
}

// decileChiSquare is Pearson's χ² of the 10×10 table (arrival decile,
// place decile) against independence, and its p-value by the
// Wilson–Hilferty normal approximation (81 degrees of freedom).
func decileChiSquare(places []int) (chi2, p float64) {
	n := len(places)
	var table [10][10]float64
	for i, place := range places {
		table[i*10/n][(place-1)*10/n]++
	}
	expected := float64(n) / 100
	for _, row := range table {
		for _, o := range row {
			chi2 += (o - expected) * (o - expected) / expected
		}
	}
	const k = 81.0
	z := (math.Cbrt(chi2/k) - (1 - 2/(9*k))) / math.Sqrt(2/(9*k))
	return chi2, 0.5 * math.Erfc(z/math.Sqrt2)
}
