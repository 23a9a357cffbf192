// Package reservationtest is the rule book of a sale, as a test suite: the
// window, the stock, one order per user, the replay of an order id, the
// release, and every result code. Every core.Reserver runs it — the Lua
// reservation on miniredis and real Redis, the sync baseline's SQL
// transaction on SQLite and MariaDB — so the rules are checked once for
// all of them instead of once per implementation.
package reservationtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Subject is one reservation implementation under test.
type Subject struct {
	// Reserver is the implementation; Board reads the stock it keeps.
	Reserver core.Reserver
	Board    core.StockBoard
	// Create makes a voucher live the way the admin API does (the
	// durable row and the live state) and returns its id.
	Create func(t *testing.T, v core.Voucher) int64
	// Now reads the clock the implementation judges the window by (Redis
	// TIME for the script, the server's clock for the SQL sale).
	Now func(t *testing.T) time.Time
}

// Run runs every rule against s.
func Run(t *testing.T, s Subject) {
	ids := &orderIDs{}
	t.Run("UnknownVoucherIsMissing", func(t *testing.T) { unknownVoucher(t, s, ids) })
	t.Run("WindowJudgedByTheImplementationsClock", func(t *testing.T) { window(t, s, ids) })
	t.Run("APausedSaleRefusesAfterTheWindow", func(t *testing.T) { paused(t, s, ids) })
	t.Run("ExactlyTheStockIsSoldToConcurrentBuyers", func(t *testing.T) { stock(t, s, ids) })
	t.Run("OneOrderPerUserUnderConcurrency", func(t *testing.T) { onePerUser(t, s, ids) })
	t.Run("ReplayOfTheSameOrderIsSuccess", func(t *testing.T) { replay(t, s, ids) })
	t.Run("HolderOfTheLastUnitIsToldTheirOrderNotSoldOut", func(t *testing.T) { holderAfterSellOut(t, s, ids) })
	t.Run("ReleaseGivesTheStockBackOnce", func(t *testing.T) { release(t, s, ids) })
}

// orderIDs hands out order ids unique within a run, as the ID worker does.
type orderIDs struct{ n atomic.Int64 }

func (o *orderIDs) order(user, voucher int64) core.Order {
	return core.Order{ID: 1_000_000 + o.n.Add(1), UserID: user, VoucherID: voucher, CreatedAt: time.Now()}
}

func create(t *testing.T, s Subject, stock int64, begin, end time.Time) int64 {
	t.Helper()
	return s.Create(t, core.Voucher{Title: "rules", PayValue: 1, ActualValue: 2, Stock: stock, BeginAt: begin, EndAt: end})
}

func open(t *testing.T, s Subject, stock int64) int64 {
	now := s.Now(t)
	return create(t, s, stock, now.Add(-time.Minute), now.Add(time.Hour))
}

func reserve(t *testing.T, s Subject, o core.Order) core.Reservation {
	t.Helper()
	r, err := s.Reserver.Reserve(context.Background(), o)
	if err != nil {
		t.Fatalf("reserve %+v: %v", o, err)
	}
	return r
}

// reserveConcurrently is reserve for a goroutine: a failure is reported
// with Errorf, since Fatal must stay on the test's own goroutine.
func reserveConcurrently(t *testing.T, s Subject, o core.Order) core.Reservation {
	r, err := s.Reserver.Reserve(context.Background(), o)
	if err != nil {
		t.Errorf("reserve %+v: %v", o, err)
	}
	return r
}

func remaining(t *testing.T, s Subject, voucher int64) int64 {
	t.Helper()
	n, err := s.Board.RemainingStock(context.Background(), voucher)
	if err != nil {
		t.Fatalf("stock of %d: %v", voucher, err)
	}
	return n
}

func expect(t *testing.T, what string, got core.Reservation, want core.ReservationResult) {
	t.Helper()
	if got.Result != want {
		t.Fatalf("%s: %s (order %d), want %s", what, name(got.Result), got.OrderID, name(want))
	}
}

func name(r core.ReservationResult) string {
	if err := r.Err(); err != nil {
		return string(core.CodeOf(err))
	}
	return "reserved"
}

func unknownVoucher(t *testing.T, s Subject, ids *orderIDs) {
	expect(t, "a voucher nobody created", reserve(t, s, ids.order(1, 987654321)), core.VoucherMissing)
	if _, err := s.Board.RemainingStock(context.Background(), 987654321); core.CodeOf(err) != core.CodeVoucherNotFound {
		t.Fatalf("stock of an unknown voucher: %v, want voucher_not_found", err)
	}
}

// window: a sale is refused before its begin and from its end on, judged
// by the implementation's own clock, with edges a short margin from it;
// a refusal takes no stock.
func window(t *testing.T, s Subject, ids *orderIDs) {
	const margin = 300 * time.Millisecond
	now := s.Now(t)
	cases := []struct {
		what       string
		begin, end time.Time
		want       core.ReservationResult
	}{
		{"begins in a moment", now.Add(margin * 3), now.Add(time.Hour), core.NotStarted},
		{"began a moment ago", now.Add(-margin), now.Add(time.Hour), core.Reserved},
		{"ends in a moment", now.Add(-time.Hour), now.Add(margin * 3), core.Reserved},
		{"ended a moment ago", now.Add(-time.Hour), now.Add(-margin), core.Ended},
	}
	for _, c := range cases {
		v := create(t, s, 5, c.begin, c.end)
		expect(t, c.what, reserve(t, s, ids.order(1, v)), c.want)
		want := int64(5)
		if c.want == core.Reserved {
			want = 4
		}
		if n := remaining(t, s, v); n != want {
			t.Fatalf("%s: stock %d after the attempt, want %d", c.what, n, want)
		}
	}
}

// paused: a sale an operator paused refuses every reservation, Paused,
// after the window's answers (a paused sale that ended is ended) and
// before the buyer's and the stock's; nothing is taken.
func paused(t *testing.T, s Subject, ids *orderIDs) {
	now := s.Now(t)
	for _, c := range []struct {
		what       string
		begin, end time.Time
		want       core.ReservationResult
	}{
		{"paused on sale", now.Add(-time.Hour), now.Add(time.Hour), core.Paused},
		{"paused and ended", now.Add(-time.Hour), now.Add(-300 * time.Millisecond), core.Ended},
		{"paused, not started", now.Add(time.Second), now.Add(time.Hour), core.NotStarted},
	} {
		v := s.Create(t, core.Voucher{Title: "rules", PayValue: 1, ActualValue: 2, Stock: 5, BeginAt: c.begin, EndAt: c.end,
			Pause: core.PausedByOperator})
		expect(t, c.what, reserve(t, s, ids.order(1, v)), c.want)
		if n := remaining(t, s, v); n != 5 {
			t.Fatalf("%s: stock %d after the attempt, want 5", c.what, n)
		}
	}
}

// stock: many buyers at once, each a different user, get exactly the stock
// between them; everyone else is told sold out, and the stock ends at 0.
func stock(t *testing.T, s Subject, ids *orderIDs) {
	const units, buyers = 20, 120
	v := open(t, s, units)
	results := make([]core.Reservation, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() { results[i] = reserveConcurrently(t, s, ids.order(int64(i+1), v)) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	count := map[core.ReservationResult]int{}
	for _, r := range results {
		count[r.Result]++
	}
	if count[core.Reserved] != units || count[core.SoldOut] != buyers-units {
		t.Fatalf("%d buyers of %d units: %d reserved, %d sold out, others %v",
			buyers, units, count[core.Reserved], count[core.SoldOut], count)
	}
	if n := remaining(t, s, v); n != 0 {
		t.Fatalf("stock %d after the sell-out, want 0", n)
	}
	expect(t, "one more buyer after the sell-out", reserve(t, s, ids.order(buyers+1, v)), core.SoldOut)
}

// onePerUser: one user's concurrent attempts with different order ids
// reserve once; the others are told which order the user holds.
func onePerUser(t *testing.T, s Subject, ids *orderIDs) {
	const attempts = 20
	v := open(t, s, 10)
	results := make([]core.Reservation, attempts)
	orders := make([]core.Order, attempts)
	for i := range orders {
		orders[i] = ids.order(77, v)
	}
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() { results[i] = reserveConcurrently(t, s, orders[i]) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var winner int64
	for i, r := range results {
		if r.Result == core.Reserved {
			if winner != 0 {
				t.Fatalf("the user reserved twice: orders %d and %d", winner, r.OrderID)
			}
			winner = orders[i].ID
			if r.OrderID != winner {
				t.Fatalf("reserved order %d answered as %d", winner, r.OrderID)
			}
		}
	}
	if winner == 0 {
		t.Fatal("none of the user's attempts reserved")
	}
	for _, r := range results {
		if r.Result != core.Reserved && (r.Result != core.AlreadyPurchased || r.OrderID != winner) {
			t.Fatalf("a losing attempt answered %s with order %d, want already_purchased with %d", name(r.Result), r.OrderID, winner)
		}
	}
	if n := remaining(t, s, v); n != 9 {
		t.Fatalf("stock %d after one user's attempts, want 9", n)
	}
	held, ok, err := s.Reserver.ReservedOrder(context.Background(), 77, v)
	if err != nil || !ok || held != winner {
		t.Fatalf("ReservedOrder = %d %v %v, want %d", held, ok, err, winner)
	}
	if _, ok, err := s.Reserver.ReservedOrder(context.Background(), 78, v); err != nil || ok {
		t.Fatalf("ReservedOrder of a user who bought nothing: %v %v", ok, err)
	}
}

// holderAfterSellOut: the buyer is checked before the stock, so a shopper
// who took the last unit and asks again (their first answer timed out, say)
// is told already_purchased with their order, never sold_out.
func holderAfterSellOut(t *testing.T, s Subject, ids *orderIDs) {
	v := open(t, s, 1)
	first := ids.order(5, v)
	expect(t, "the first attempt", reserve(t, s, first), core.Reserved)
	got := reserve(t, s, ids.order(5, v))
	if got.Result != core.AlreadyPurchased || got.OrderID != first.ID {
		t.Fatalf("the holder of the last unit asked again and was answered %s with order %d, want already_purchased with %d",
			name(got.Result), got.OrderID, first.ID)
	}
	var held *core.AlreadyPurchasedError
	if err := got.Err(); !errors.As(err, &held) || held.OrderID != first.ID || !errors.Is(err, core.ErrAlreadyPurchased) {
		t.Fatalf("the answer's error %v does not carry the held order %d", err, first.ID)
	}
}

// replay: the same order id again (a client or pipeline retry) is answered
// as the success it was, takes no more stock, and still is after the stock
// ran out.
func replay(t *testing.T, s Subject, ids *orderIDs) {
	v := open(t, s, 1)
	first := ids.order(5, v)
	expect(t, "the first attempt", reserve(t, s, first), core.Reserved)
	expect(t, "a second user", reserve(t, s, ids.order(6, v)), core.SoldOut)
	got := reserve(t, s, first)
	expect(t, "the same order again, after the sell-out", got, core.Reserved)
	if got.OrderID != first.ID {
		t.Fatalf("the replay answered order %d, want %d", got.OrderID, first.ID)
	}
	if n := remaining(t, s, v); n != 0 {
		t.Fatalf("stock %d after a sale and its replay, want 0", n)
	}
}

// release: undoing a reservation gives its unit back and lets the user buy
// again; a second release, a release of another order id of the same user,
// or of an order never reserved, changes nothing.
func release(t *testing.T, s Subject, ids *orderIDs) {
	ctx := context.Background()
	v := open(t, s, 3)
	o := ids.order(9, v)
	expect(t, "reserve", reserve(t, s, o), core.Reserved)
	// The same user's other, stale order id releases nothing.
	if err := s.Reserver.Release(ctx, ids.order(9, v)); err != nil {
		t.Fatal(err)
	}
	if n := remaining(t, s, v); n != 2 {
		t.Fatalf("stock %d after releasing a stale order id of the user, want 2", n)
	}
	for i := range 2 {
		if err := s.Reserver.Release(ctx, o); err != nil {
			t.Fatal(err)
		}
		if n := remaining(t, s, v); n != 3 {
			t.Fatalf("stock %d after release %d, want 3", n, i+1)
		}
	}
	if err := s.Reserver.Release(ctx, ids.order(10, v)); err != nil {
		t.Fatal(err)
	}
	if n := remaining(t, s, v); n != 3 {
		t.Fatalf("stock %d after releasing an order never reserved, want 3", n)
	}
	expect(t, "the user buys again", reserve(t, s, ids.order(9, v)), core.Reserved)
	if n := remaining(t, s, v); n != 2 {
		t.Fatalf("stock %d after the second purchase, want 2", n)
	}
}
