package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func testMemo(lifetime time.Duration, n StockNudger) (*AnswerMemo, *clock) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	m := NewAnswerMemo(lifetime, n)
	m.now = c.now
	return m, c
}

func TestTheMemoRemembersOnlyAnswersThatCannotChange(t *testing.T) {
	m, c := testMemo(time.Minute, nil)
	for _, r := range []Reservation{
		{Result: Reserved, OrderID: 1},
		{Result: AlreadyPurchased, OrderID: 1},
		{Result: RateLimited, RetryAfter: time.Second},
		{Result: VoucherMissing},
	} {
		m.Remember(1, "", m.Generation(), r)
		if got, ok := m.Answer(1, ""); ok {
			t.Fatalf("%v was remembered (answers %v): it depends on the shopper or may change any moment", r.Result, got)
		}
	}
	m.Remember(1, "", m.Generation(), Reservation{Result: SoldOut})
	if got, ok := m.Answer(1, ""); !ok || got != SoldOut {
		t.Fatalf("sold out not remembered: %v %v", got, ok)
	}
	if _, ok := m.Answer(2, ""); ok {
		t.Fatal("another voucher answered from the memo")
	}
	c.t = c.t.Add(time.Minute)
	if _, ok := m.Answer(1, ""); ok {
		t.Fatal("sold out still answered after the lifetime")
	}
}

func TestWindowAnswersStayOffTheEdges(t *testing.T) {
	m, c := testMemo(time.Minute, nil)
	// Opens in 900 ms: within the margin, not remembered.
	m.Remember(1, "", m.Generation(), Reservation{Result: NotStarted, WindowEdge: 900 * time.Millisecond})
	if _, ok := m.Answer(1, ""); ok {
		t.Fatal("not started remembered within a second of the opening")
	}
	// Opens in 5 s: remembered until a second before.
	m.Remember(1, "", m.Generation(), Reservation{Result: NotStarted, WindowEdge: 5 * time.Second})
	c.t = c.t.Add(3999 * time.Millisecond)
	if got, ok := m.Answer(1, ""); !ok || got != NotStarted {
		t.Fatalf("not started 4 s before the opening: %v %v", got, ok)
	}
	c.t = c.t.Add(time.Millisecond)
	if _, ok := m.Answer(1, ""); ok {
		t.Fatal("not started still answered a second before the opening")
	}
	// Ended 500 ms ago: not yet; 2 s ago: yes.
	m.Remember(2, "", m.Generation(), Reservation{Result: Ended, WindowEdge: 500 * time.Millisecond})
	if _, ok := m.Answer(2, ""); ok {
		t.Fatal("ended remembered within a second of the close")
	}
	m.Remember(2, "", m.Generation(), Reservation{Result: Ended, WindowEdge: 2 * time.Second})
	if got, ok := m.Answer(2, ""); !ok || got != Ended {
		t.Fatalf("ended 2 s after the close: %v %v", got, ok)
	}
}

type nudges struct{ sent []int64 }

func (n *nudges) NudgeStockBack(_ context.Context, v int64) error {
	n.sent = append(n.sent, v)
	return nil
}

func TestStockBackForgetsAndNudges(t *testing.T) {
	n := &nudges{}
	m, _ := testMemo(time.Minute, n)
	m.Remember(1, "", m.Generation(), Reservation{Result: SoldOut})
	m.Remember(2, "", m.Generation(), Reservation{Result: SoldOut})
	if err := m.StockBack(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Answer(1, ""); ok {
		t.Fatal("sold out answered after the stock came back")
	}
	if _, ok := m.Answer(2, ""); !ok {
		t.Fatal("another voucher was forgotten too")
	}
	if len(n.sent) != 1 || n.sent[0] != 1 {
		t.Fatalf("nudges sent %v, want [1]", n.sent)
	}
	m.Clear()
	if _, ok := m.Answer(2, ""); ok {
		t.Fatal("Clear kept an answer")
	}
}

// TestAnAnswerFetchedBeforeAForgetIsNotRemembered: the sold out a request
// read before the stock came back arrives after the nudge; keeping it
// would hide the returned stock for a lifetime.
func TestAnAnswerFetchedBeforeAForgetIsNotRemembered(t *testing.T) {
	m, _ := testMemo(time.Minute, nil)
	g := m.Generation()
	m.Forget(1) // the nudge, while the reservation was on its way
	m.Remember(1, "", g, Reservation{Result: SoldOut})
	if _, ok := m.Answer(1, ""); ok {
		t.Fatal("a sold out read before the stock came back was remembered after it")
	}
}

func TestAnotherIncarnationIgnoresTheMemo(t *testing.T) {
	m, _ := testMemo(time.Minute, nil)
	m.Remember(1, "run-a", m.Generation(), Reservation{Result: SoldOut})
	if _, ok := m.Answer(1, "run-b"); ok {
		t.Fatal("an answer of the old Redis served after it changed")
	}
}

func TestAZeroLifetimeRemembersNothing(t *testing.T) {
	m, _ := testMemo(0, nil)
	m.Remember(1, "", m.Generation(), Reservation{Result: SoldOut})
	if _, ok := m.Answer(1, ""); ok {
		t.Fatal("remembered with lifetime 0")
	}
}

func TestTheMemoStaysBounded(t *testing.T) {
	m, c := testMemo(time.Second, nil)
	for v := int64(0); v < 3*maxMemoEntries; v++ {
		m.Remember(v, "", m.Generation(), Reservation{Result: SoldOut})
		if v%maxMemoEntries == 0 {
			c.t = c.t.Add(2 * time.Second)
		}
	}
	if n := len(m.entries); n > maxMemoEntries+1 {
		t.Fatalf("%d entries kept, bound %d", n, maxMemoEntries)
	}
}

// TestSeckillAnswersFromTheMemo: once the reserver answered sold out, the
// use case answers it without the reserver, the ID generator or recovery,
// until the stock comes back; a release after a refused publish gives the
// stock back and nudges.
func TestSeckillAnswersFromTheMemo(t *testing.T) {
	res := &countingReserver{result: SoldOut}
	n := &nudges{}
	m, _ := testMemo(time.Minute, n)
	s := NewSeckill(SeckillConfig{IDs: &seqIDs{}, Reserver: res, Memo: m})
	for i := range 5 {
		if _, err := s.Buy(context.Background(), int64(i+1), 7); !errors.Is(err, ErrSoldOut) {
			t.Fatalf("request %d: %v, want sold out", i+1, err)
		}
	}
	if res.calls != 1 {
		t.Fatalf("the reserver ran %d times for 5 sold-out requests, want 1", res.calls)
	}
	res.result = Reserved
	m.StockBack(context.Background(), 7)
	if _, err := s.Buy(context.Background(), 9, 7); err != nil {
		t.Fatalf("after the stock came back: %v", err)
	}

	// A publisher that refuses: the reservation is released, the stock is
	// back, and the other instances are nudged.
	n.sent = nil
	s = NewSeckill(SeckillConfig{IDs: &seqIDs{}, Reserver: res, Publisher: refusingPublisher{}, Memo: m})
	if _, err := s.Buy(context.Background(), 10, 8); !errors.Is(err, ErrBusy) {
		t.Fatalf("refused publish: %v, want busy", err)
	}
	if len(n.sent) != 1 || n.sent[0] != 8 {
		t.Fatalf("nudges after a release: %v, want [8]", n.sent)
	}
}

type countingReserver struct {
	result ReservationResult
	calls  int
}

func (r *countingReserver) Reserve(_ context.Context, o Order) (Reservation, error) {
	r.calls++
	return Reservation{Result: r.result, OrderID: o.ID}, nil
}
func (r *countingReserver) Release(context.Context, Order) error { return nil }
func (r *countingReserver) ReservedOrder(context.Context, int64, int64) (int64, bool, error) {
	return 0, false, nil
}

type seqIDs struct{ n int64 }

func (s *seqIDs) NextID(context.Context) (int64, error) { s.n++; return s.n, nil }

type refusingPublisher struct{}

func (refusingPublisher) Publish(context.Context, []byte) error { return ErrQueueFull }

// TestTheMemoKeepsBuyersUntilTheirMarkMayHaveGone: a shopper remembered as
// holding an order is answered with it, for that voucher, shopper and
// incarnation only, for the lifetime at most; forgetting the voucher (a
// release here or on another instance, a rebuild) or everything drops it,
// and a buyer learned before a Forget is not remembered after it.
func TestTheMemoKeepsBuyersUntilTheirMarkMayHaveGone(t *testing.T) {
	m, c := testMemo(time.Minute, nil)
	m.RememberBuyer(1, 7, 42, "a", m.Generation())
	if id, ok := m.Buyer(1, 7, "a"); !ok || id != 42 {
		t.Fatalf("buyer 7 of voucher 1: %d %v, want order 42", id, ok)
	}
	for _, probe := range []struct {
		voucher, user int64
		incarnation   string
	}{{1, 8, "a"}, {2, 7, "a"}, {1, 7, "b"}} {
		if id, ok := m.Buyer(probe.voucher, probe.user, probe.incarnation); ok {
			t.Fatalf("%+v answered from the memo with order %d", probe, id)
		}
	}
	c.t = c.t.Add(time.Minute)
	if _, ok := m.Buyer(1, 7, "a"); ok {
		t.Fatal("a buyer still answered after the lifetime")
	}

	m.RememberBuyer(1, 7, 42, "a", m.Generation())
	m.RememberBuyer(2, 7, 43, "a", m.Generation())
	m.Forget(1) // the voucher's stock came back: a mark may have gone
	if _, ok := m.Buyer(1, 7, "a"); ok {
		t.Fatal("a buyer of a forgotten voucher still answered")
	}
	if id, ok := m.Buyer(2, 7, "a"); !ok || id != 43 {
		t.Fatalf("forgetting voucher 1 dropped voucher 2's buyer: %d %v", id, ok)
	}
	stale := m.Generation()
	m.Forget(3)
	m.RememberBuyer(1, 9, 44, "a", stale)
	if _, ok := m.Buyer(1, 9, "a"); ok {
		t.Fatal("a buyer learned before a Forget was remembered after it")
	}
	m.Clear()
	if _, ok := m.Buyer(2, 7, "a"); ok {
		t.Fatal("Clear kept a buyer")
	}
	off, _ := testMemo(0, nil)
	off.RememberBuyer(1, 7, 42, "a", off.Generation())
	if _, ok := off.Buyer(1, 7, "a"); ok {
		t.Fatal("a memo with no lifetime remembered a buyer")
	}
}

// TestTheBuyersKeptAreBounded: past maxMemoBuyers, expired buyers are
// swept; if all are live, they are forgotten rather than grow the map.
func TestTheBuyersKeptAreBounded(t *testing.T) {
	m, c := testMemo(time.Second, nil)
	for u := int64(1); u <= maxMemoBuyers; u++ {
		m.RememberBuyer(1+u%3, u, u, "", m.Generation())
	}
	if m.buyerCount != maxMemoBuyers {
		t.Fatalf("%d buyers counted, want %d", m.buyerCount, maxMemoBuyers)
	}
	c.t = c.t.Add(2 * time.Second)
	m.RememberBuyer(1, -1, 1, "", m.Generation()) // one over: the expired go
	if m.buyerCount != 1 || len(m.buyers) != 1 {
		t.Fatalf("after the sweep %d buyers in %d vouchers, want the 1 live", m.buyerCount, len(m.buyers))
	}
	for u := int64(1); u <= maxMemoBuyers; u++ {
		m.RememberBuyer(1, u, u, "", m.Generation())
	}
	if m.buyerCount != 0 || len(m.buyers) != 0 {
		t.Fatalf("%d live buyers over the bound were kept, want them forgotten", m.buyerCount)
	}
	m.RememberBuyer(2, 5, 5, "", m.Generation())
	m.Forget(2)
	if m.buyerCount != 0 {
		t.Fatalf("the count is %d after forgetting the only buyer", m.buyerCount)
	}
}
