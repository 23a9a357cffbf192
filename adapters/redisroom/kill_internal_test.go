package redisroom

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/room"
)

// The admitter process's settings: it rebuilds the test's room from them.
const (
	helperEnv = "SECKILL_ROOM_HELPER"
	roomEnv   = "SECKILL_ROOM_SPEC" // redisURL prefix id beginMs endMs rate ttlMs seedHex
)

// TestMain lets the test binary double as an admitter process to be
// killed.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "admitter" {
		os.Exit(runAdmitter())
	}
	os.Exit(m.Run())
}

// runAdmitter makes admission passes over the room as fast as it can,
// printing "passing" after its first, until it is killed.
func runAdmitter() int {
	f := strings.Fields(os.Getenv(roomEnv))
	opts, err := redis.ParseURL(f[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n := make([]int64, 5)
	for i := range n {
		n[i], _ = strconv.ParseInt(f[2+i], 10, 64)
	}
	seed, _ := hex.DecodeString(f[7])
	v := core.Voucher{ID: n[0], BeginAt: time.UnixMilli(n[1]), EndAt: time.UnixMilli(n[2]),
		Room: &core.Room{AdmitPerSecond: int(n[3]), AdmissionTTL: time.Duration(n[4]) * time.Millisecond}}
	copy(v.Room.Seed[:], seed)
	shards, _ := core.NewShards("s0", "s1", "s2")
	b := New(redis.NewClient(opts), f[1], shards)
	for i := 0; ; i++ {
		if _, err := b.Advance(context.Background(), v, 100, -1); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if i == 0 {
			fmt.Println("passing")
		}
	}
}

// TestAKilledAdmitterLosesNoPlace kills (SIGKILL) an admitter process
// again and again while this process admits the same room: whatever the
// moment of the kill, every position is admitted once, in order, and the
// room goes on to admit everyone.
func TestAKilledAdmitterLosesNoPlace(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		url := os.Getenv(testenv.RedisURLEnv)
		if r.Mini != nil {
			url = "redis://" + r.Mini.Addr()
		}
		b := newBoard(t, r)
		const rate, shoppers = 200, 300
		v := roomVoucher(t, 46, rate, time.Minute, 200*time.Millisecond)
		for u := int64(1); u <= shoppers; u++ {
			if err := b.Join(ctx, v, u, -1); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(v.BeginAt)
		drawAndPlace(t, b, v)
		spec := fmt.Sprintf("%s %s %d %d %d %d %d %s", url, r.Prefix, v.ID, v.BeginAt.UnixMilli(), v.EndAt.UnixMilli(),
			rate, v.Room.AdmissionTTL.Milliseconds(), hex.EncodeToString(v.Room.Seed[:]))
		for kill := range 5 {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"=admitter", roomEnv+"="+spec)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if line, _ := bufio.NewReader(out).ReadString('\n'); line != "passing\n" {
				cmd.Process.Kill()
				t.Fatalf("kill %d: the admitter said %q", kill, line)
			}
			// This process admits alongside until the kill, at a moment
			// of the admitter's passes the test does not choose.
			until := time.Now().Add(time.Duration(20+rand.IntN(150)) * time.Millisecond)
			for time.Now().Before(until) {
				if _, err := b.Advance(ctx, v, 100, shoppers); err != nil {
					t.Fatal(err)
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
		}
		deadline := time.Now().Add(5 * time.Second)
		var p room.Progress
		for p.Frontier < shoppers && time.Now().Before(deadline) {
			var err error
			if p, err = b.Advance(ctx, v, 100, shoppers); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		next := int64(1)
		for _, pass := range passes(t, b, v.ID) {
			if pass[0] != next || pass[1] < pass[0] {
				t.Fatalf("pass %d..%d after %d: a place skipped or admitted twice", pass[0], pass[1], next-1)
			}
			next = pass[1] + 1
		}
		if next-1 != shoppers || p.Frontier != shoppers {
			t.Fatalf("admitted %d (frontier %d) of %d places", next-1, p.Frontier, shoppers)
		}
		for u := int64(1); u <= shoppers; u++ {
			if seat, err := b.Seat(ctx, v, u); err != nil || seat.AdmittedAt.IsZero() || seat.Position > p.Frontier {
				t.Fatalf("shopper %d: %+v, %v; want admitted", u, seat, err)
			}
		}
	})
}
