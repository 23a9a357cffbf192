package redisreserve_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

type sale struct {
	r      testenv.Redis
	res    *redisreserve.Reserver
	keys   redisreserve.Keys
	stream string
}

// handoff is the hand-off of one kind of queue on key, as its adapter
// declares it; "none" is the zero Handoff (the caller publishes).
func handoff(kind, key string) core.Handoff {
	at := func(int64) string { return key }
	switch kind {
	case "xadd":
		return core.Handoff{Command: []string{"XADD", core.HandoffKey, "*", "order", core.HandoffBody}, Key: at}
	case "lpush":
		return core.Handoff{Command: []string{"LPUSH", core.HandoffKey, core.HandoffBody}, Key: at}
	case "publish":
		return core.Handoff{Command: []string{"PUBLISH", core.HandoffKey, core.HandoffBody}, Key: at, CountsReceivers: true}
	}
	return core.Handoff{}
}

func newSale(t *testing.T, r testenv.Redis, kind string) sale {
	t.Helper()
	return newSaleWith(t, r, kind, false)
}

func newSaleWith(t *testing.T, r testenv.Redis, kind string, coalesce bool) sale {
	t.Helper()
	stream := r.Prefix + kind + ":orders"
	cfg := redisreserve.Config{Prefix: r.Prefix, Handoff: handoff(kind, stream), Coalesce: coalesce}
	res, err := redisreserve.New(r.Client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sale{r: r, res: res, keys: res.Keys(), stream: stream}
}

func (s sale) load(t *testing.T, id, stock int64, begin, end time.Time) {
	t.Helper()
	v := core.Voucher{ID: id, Title: "t", Stock: stock, BeginAt: begin, EndAt: end}
	if err := s.res.LoadVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
}

func (s sale) reserve(t *testing.T, orderID, userID, voucherID int64) core.Reservation {
	t.Helper()
	o := core.Order{ID: orderID, UserID: userID, VoucherID: voucherID, CreatedAt: time.Now()}
	r, err := s.res.Reserve(context.Background(), o)
	if err != nil {
		t.Fatalf("reserve order %d: %v", orderID, err)
	}
	return r
}

func (s sale) stock(t *testing.T, voucherID int64) int64 {
	t.Helper()
	n, err := s.res.RemainingStock(context.Background(), voucherID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (s sale) streamLen(t *testing.T) int64 {
	t.Helper()
	n, err := s.r.Client.XLen(context.Background(), s.stream).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var (
	past   = func() time.Time { return time.Now().Add(-time.Hour) }
	future = func() time.Time { return time.Now().Add(time.Hour) }
)

// TestScriptSpecifics: what is the script's own, beyond the rule book
// every Reserver keeps (TestRules): how a half-loaded voucher reads, and
// that the hand-off runs once per reservation, replays included.
func TestScriptSpecifics(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		s := newSale(t, r, "xadd")
		ctx := context.Background()

		t.Run("missing stock key is its own result, not a Lua error", func(t *testing.T) {
			got := s.reserve(t, 1, 1, 404)
			if got.Result != core.VoucherMissing {
				t.Fatalf("result = %v, want VoucherMissing", got.Result)
			}
		})
		t.Run("stock without a window is not loaded", func(t *testing.T) {
			r.Client.Set(ctx, s.keys.Stock(405), 10, 0)
			if got := s.reserve(t, 2, 1, 405); got.Result != core.VoucherMissing {
				t.Fatalf("result = %v, want VoucherMissing", got.Result)
			}
		})
		t.Run("reserve takes stock, records the user and emits one message", func(t *testing.T) {
			s.load(t, 12, 2, past(), future())
			before := s.streamLen(t)
			got := s.reserve(t, 100, 7, 12)
			if got.Result != core.Reserved || got.OrderID != 100 {
				t.Fatalf("got %+v, want Reserved order 100", got)
			}
			if n := s.stock(t, 12); n != 1 {
				t.Fatalf("stock = %d, want 1", n)
			}
			held, ok, err := s.res.ReservedOrder(ctx, 7, 12)
			if err != nil || !ok || held != 100 {
				t.Fatalf("ReservedOrder = %d %v %v, want 100", held, ok, err)
			}
			if n := s.streamLen(t) - before; n != 1 {
				t.Fatalf("stream grew by %d, want 1", n)
			}
			last, err := r.Client.XRevRangeN(ctx, s.stream, "+", "-", 1).Result()
			if err != nil {
				t.Fatal(err)
			}
			o, err := core.DecodeOrder([]byte(last[0].Values["order"].(string)))
			if err != nil || o.ID != 100 || o.UserID != 7 || o.VoucherID != 12 {
				t.Fatalf("emitted message = %+v (%v), want order 100 of user 7 for voucher 12", o, err)
			}
		})
		t.Run("replay of the same order id is success, reserved and emitted once", func(t *testing.T) {
			s.load(t, 13, 1, past(), future())
			before := s.streamLen(t)
			first := s.reserve(t, 200, 8, 13)
			// Stock is now 0: a replay must not report sold out or
			// already purchased to the buyer who got the item.
			again := s.reserve(t, 200, 8, 13)
			if first.Result != core.Reserved || again.Result != core.Reserved || again.OrderID != 200 {
				t.Fatalf("first %+v, replay %+v: want both Reserved with order 200", first, again)
			}
			if n := s.stock(t, 13); n != 0 {
				t.Fatalf("stock = %d after a replay, want 0", n)
			}
			if n := s.streamLen(t) - before; n != 1 {
				t.Fatalf("replay emitted %d messages, want 1", n)
			}
		})
	})
}

func TestHandoffs(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		t.Run("lpush", func(t *testing.T) {
			s := newSale(t, r, "lpush")
			s.load(t, 20, 5, past(), future())
			s.reserve(t, 1, 1, 20)
			if n := r.Client.LLen(ctx, s.stream).Val(); n != 1 {
				t.Fatalf("list length = %d, want 1", n)
			}
		})
		t.Run("publish counts its receivers", func(t *testing.T) {
			var heard []int64
			stream := r.Prefix + "orders"
			res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: r.Prefix,
				Handoff: handoff("publish", stream), OnReceivers: func(n int64) { heard = append(heard, n) }})
			if err != nil {
				t.Fatal(err)
			}
			s := sale{r: r, res: res, keys: res.Keys(), stream: stream}
			s.load(t, 21, 5, past(), future())
			s.reserve(t, 1, 1, 21)
			sub := r.Client.Subscribe(ctx, stream)
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			s.reserve(t, 2, 2, 21)
			msg, err := sub.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if o, err := core.DecodeOrder([]byte(msg.Payload)); err != nil || o.ID != 2 {
				t.Fatalf("received %q (%v), want order 2", msg.Payload, err)
			}
			// A replay hands nothing off, so it reports no receivers at all
			// (not zero, which would count as an order nobody heard).
			s.reserve(t, 2, 2, 21)
			if len(heard) != 2 || heard[0] != 0 || heard[1] != 1 {
				t.Fatalf("receivers = %v, want [0 1]", heard)
			}
		})
		t.Run("none emits nothing", func(t *testing.T) {
			s := newSale(t, r, "none")
			s.load(t, 22, 5, past(), future())
			if got := s.reserve(t, 1, 1, 22); got.Result != core.Reserved {
				t.Fatalf("got %+v", got)
			}
			if n := r.Client.Exists(ctx, s.stream).Val(); n != 0 {
				t.Fatal("handoff none wrote to the queue key")
			}
		})
	})
}

func TestScriptIsReloadedAfterScriptFlush(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		if r.Real() {
			t.Skip("SCRIPT FLUSH would disturb other tests sharing the server")
		}
		for _, coalesce := range []bool{false, true} {
			s := newSaleWith(t, r, "xadd", coalesce)
			v := int64(30)
			if coalesce {
				v = 31
			}
			s.load(t, v, 5, past(), future())
			r.Client.ScriptFlush(context.Background())
			if got := s.reserve(t, v, 1, v); got.Result != core.Reserved {
				t.Fatalf("coalesce %v: got %+v after SCRIPT FLUSH", coalesce, got)
			}
		}
	})
}

// pipelineSizes records the size of every pipeline a client sends.
type pipelineSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (p *pipelineSizes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelineSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelineSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.mu.Lock()
		p.sizes = append(p.sizes, len(cmds))
		p.mu.Unlock()
		return next(ctx, cmds)
	}
}

// TestCoalescedReservationsUnderContention: with Coalesce, concurrent
// reservations really share pipelines, and sharing changes nothing: no
// oversell, one order per user, one queue message per reservation.
func TestCoalescedReservationsUnderContention(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		sizes := &pipelineSizes{}
		r.Client.AddHook(sizes)
		s := newSaleWith(t, r, "xadd", true)
		const stock, users, shoppers = 300, 1000, 100
		s.load(t, 40, stock, past(), future())
		var (
			mu       sync.Mutex
			reserved = map[int64]int64{} // user -> order id
			orderIDs = map[int64]bool{}
			nextID   atomic.Int64
			wg       sync.WaitGroup
		)
		for g := range shoppers {
			wg.Go(func() {
				// Every user asks twice: the second must never reserve.
				for i := range 2 * users / shoppers {
					user := int64(g*users/shoppers + i%(users/shoppers) + 1)
					id := nextID.Add(1)
					got, err := s.res.Reserve(context.Background(), core.Order{ID: id, UserID: user, VoucherID: 40, CreatedAt: time.Now()})
					if err != nil {
						t.Error(err)
						return
					}
					if got.Result != core.Reserved {
						continue
					}
					mu.Lock()
					if prev, ok := reserved[user]; ok {
						t.Errorf("user %d reserved twice: orders %d and %d", user, prev, got.OrderID)
					}
					if orderIDs[got.OrderID] {
						t.Errorf("order id %d answered twice", got.OrderID)
					}
					reserved[user], orderIDs[got.OrderID] = got.OrderID, true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(reserved) != stock || s.stock(t, 40) != 0 || s.streamLen(t) != stock {
			t.Fatalf("%d reserved, stock left %d, %d queued; want %d, 0, %d", len(reserved), s.stock(t, 40), s.streamLen(t), stock, stock)
		}
		sizes.mu.Lock()
		defer sizes.mu.Unlock()
		largest := 0
		for _, n := range sizes.sizes {
			largest = max(largest, n)
		}
		if largest < 2 {
			t.Fatalf("%d pipelines, none with more than one command: the reservations were not coalesced", len(sizes.sizes))
		}
		t.Logf("%d pipelines, largest %d commands", len(sizes.sizes), largest)
	})
}

func TestRemainingStockOfUnknownVoucher(t *testing.T) {
	r := testenv.Miniredis(t)
	s := newSale(t, r, "xadd")
	_, err := s.res.RemainingStock(context.Background(), 999)
	if !errors.Is(err, core.ErrVoucherNotFound) {
		t.Fatalf("err = %v, want ErrVoucherNotFound", err)
	}
}

// TestTheScriptLimitsEachShopperPerVoucher: with ShopperRate 2 a shopper's
// reservation is not counted (it writes the buyer mark, not the limit
// state: TestAReservationWritesNoLimitState), the next two requests get
// their answers (already purchased), the fourth is refused RateLimited with
// the delay until the next admission, and after that delay the shopper is
// admitted again.
// The limit is per shopper and voucher: another shopper, and the same
// shopper on another voucher, are not held back. A limited request takes
// no stock.
func TestTheScriptLimitsEachShopperPerVoucher(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: r.Prefix, ShopperRate: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []int64{1, 2} {
			if err := res.LoadVoucher(ctx, core.Voucher{ID: v, Stock: 10, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		id := int64(100)
		reserve := func(user, voucher int64) core.Reservation {
			t.Helper()
			id++
			got, err := res.Reserve(ctx, core.Order{ID: id, UserID: user, VoucherID: voucher, CreatedAt: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		for i, want := range []core.ReservationResult{core.Reserved, core.AlreadyPurchased, core.AlreadyPurchased, core.RateLimited} {
			if got := reserve(7, 1); got.Result != want {
				t.Fatalf("request %d of shopper 7: %+v, want %v", i+1, got, want)
			}
		}
		limited := reserve(7, 1)
		if limited.Result != core.RateLimited || limited.RetryAfter <= 0 || limited.RetryAfter > time.Second {
			t.Fatalf("over the limit: %+v, want RateLimited with a delay in (0, 1s]", limited)
		}
		var rl *core.RateLimitedError
		if !errors.As(limited.Err(), &rl) || rl.RetryAfter != limited.RetryAfter || core.CodeOf(limited.Err()) != core.CodeRateLimited {
			t.Fatalf("the error %v does not carry the code and the delay %v", limited.Err(), limited.RetryAfter)
		}
		if got := reserve(8, 1); got.Result != core.Reserved {
			t.Fatalf("another shopper on the voucher: %+v", got)
		}
		if got := reserve(7, 2); got.Result != core.Reserved {
			t.Fatalf("shopper 7 on another voucher: %+v", got)
		}
		if left, _ := res.RemainingStock(ctx, 1); left != 8 {
			t.Fatalf("stock left %d, want 8: a limited request took stock", left)
		}
		time.Sleep(limited.RetryAfter + 20*time.Millisecond)
		if got := reserve(7, 1); got.Result != core.AlreadyPurchased {
			t.Fatalf("after the delay: %+v, want admitted (already purchased)", got)
		}
	})
}

// TestAReservationWritesNoLimitState: a reservation leaves no limit key for
// its shopper (the buyer mark stands for it), a refused request does — in
// one script call each and in batches alike, so the costliest write of a
// new shopper–voucher pair is gone from every accepted order.
func TestAReservationWritesNoLimitState(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		for _, batch := range []int{0, 8} {
			ctx := context.Background()
			prefix := fmt.Sprintf("%sb%d:", r.Prefix, batch)
			res, err := redisreserve.New(r.Client, redisreserve.Config{Prefix: prefix, ShopperRate: 5, Batch: batch})
			if err != nil {
				t.Fatal(err)
			}
			if err := res.LoadVoucher(ctx, core.Voucher{ID: 1, Stock: 1, BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			limitKeys := func(user int64) int64 {
				t.Helper()
				n, err := r.Client.Exists(ctx, res.Keys().Limit(1, user)).Result()
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			for i, c := range []struct {
				user  int64
				want  core.ReservationResult
				limit int64
			}{{7, core.Reserved, 0}, {8, core.SoldOut, 1}, {7, core.AlreadyPurchased, 1}} {
				got, err := res.Reserve(ctx, core.Order{ID: int64(100 + i), UserID: c.user, VoucherID: 1, CreatedAt: time.Now()})
				if err != nil || got.Result != c.want {
					t.Fatalf("batch %d, request %d of shopper %d: %+v, %v; want %v", batch, i+1, c.user, got, err, c.want)
				}
				if n := limitKeys(c.user); n != c.limit {
					t.Fatalf("batch %d, after request %d (%v) shopper %d has %d limit keys, want %d", batch, i+1, c.want, c.user, n, c.limit)
				}
			}
		}
	})
}

// lateContext is a request whose deadline passed while its reservation
// waited in Redis's queue: the context has not ended yet on the caller's
// side (its timer has not fired, or the client is retrying), but the
// deadline it carries is behind Redis's clock.
type lateContext struct{ context.Context }

func (lateContext) Deadline() (time.Time, bool) { return time.Now().Add(-50 * time.Millisecond), true }

// TestAReservationPastItsDeadlineReservesNothing: the script compares the
// request's deadline with Redis's clock and, past it, takes no stock,
// records no buyer and hands nothing to the queue; the same shopper with
// time left is served.
func TestAReservationPastItsDeadlineReservesNothing(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		s := newSale(t, r, "stream")
		s.load(t, 1, 5, past(), future())
		o := core.Order{ID: 77, UserID: 7, VoucherID: 1, CreatedAt: time.Now()}
		got, err := s.res.Reserve(lateContext{context.Background()}, o)
		if err != nil {
			t.Fatal(err)
		}
		if got.Result != core.DeadlinePassed || !errors.Is(got.Err(), core.ErrDeadlinePassed) {
			t.Fatalf("a reservation past its deadline: %+v, want deadline passed", got)
		}
		if n := s.stock(t, 1); n != 5 || s.streamLen(t) != 0 {
			t.Fatalf("after it: stock %d, %d queued; want 5 and none", n, s.streamLen(t))
		}
		if _, held, _ := s.res.ReservedOrder(context.Background(), 7, 1); held {
			t.Fatal("the late request's shopper is recorded as a buyer")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if got, err := s.res.Reserve(ctx, core.Order{ID: 78, UserID: 7, VoucherID: 1, CreatedAt: time.Now()}); err != nil || got.Result != core.Reserved {
			t.Fatalf("the shopper with time left: %+v %v", got, err)
		}
	})
}

// TestARebuildsFenceIsNoKeyWithATimeToLive: the fence is held by one
// rebuild at a time, lapses by Redis's clock, and lives in the voucher's
// window hash — no key with a time to live of its own, which a Redis
// under a volatile-* eviction policy would evict first, letting two
// rebuilds race.
func TestARebuildsFenceIsNoKeyWithATimeToLive(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		s := newSale(t, r, "stream")
		s.load(t, 1, 5, past(), future())
		ctx := context.Background()
		token, ok, err := s.res.Live().Fence(ctx, 1, 300*time.Millisecond)
		if err != nil || !ok {
			t.Fatalf("fence: %v %v", ok, err)
		}
		if _, again, _ := s.res.Live().Fence(ctx, 1, time.Second); again {
			t.Fatal("a second rebuild took the fence the first holds")
		}
		if fenced, err := s.res.Live().Fenced(ctx, 1); err != nil || !fenced {
			t.Fatalf("fenced: %v %v, want true", fenced, err)
		}
		keys := []string{s.keys.Window(1), s.keys.Orders(1)}
		if r.Name != "cluster" { // KEYS asks one node of a cluster
			keys = r.Client.Keys(ctx, r.Prefix+"*").Val()
		}
		for _, k := range keys {
			if ttl := r.Client.PTTL(ctx, k).Val(); ttl >= 0 {
				t.Fatalf("%s has a time to live (%v) while fenced", k, ttl)
			}
		}
		if n := r.Client.Exists(ctx, s.keys.Stock(1)).Val(); n != 0 {
			t.Fatal("the stock is still there under the fence: reservations would run")
		}
		if err := s.res.Live().Unfence(ctx, 1, "not-"+token); err != nil {
			t.Fatal(err)
		}
		if fenced, _ := s.res.Live().Fenced(ctx, 1); !fenced {
			t.Fatal("another token lifted the fence")
		}
		if r.Mini != nil {
			r.Mini.FastForward(400 * time.Millisecond)
			r.Mini.SetTime(time.Now().Add(400 * time.Millisecond))
		} else {
			time.Sleep(400 * time.Millisecond)
		}
		if fenced, _ := s.res.Live().Fenced(ctx, 1); fenced {
			t.Fatal("the fence did not lapse")
		}
		if _, ok, _ := s.res.Live().Fence(ctx, 1, time.Second); !ok {
			t.Fatal("a lapsed fence could not be taken again")
		}
	})
}
