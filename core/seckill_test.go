package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

type counterIDs struct{ n int64 }

func (c *counterIDs) NextID(context.Context) (int64, error) { c.n++; return c.n, nil }

type fakeReserver struct {
	result   core.ReservationResult
	reserved []core.Order
	released []core.Order
}

func (r *fakeReserver) Reserve(_ context.Context, o core.Order) (core.Reservation, error) {
	if r.result != core.Reserved {
		return core.Reservation{Result: r.result}, nil
	}
	r.reserved = append(r.reserved, o)
	return core.Reservation{Result: core.Reserved, OrderID: o.ID}, nil
}
func (r *fakeReserver) Release(_ context.Context, o core.Order) error {
	r.released = append(r.released, o)
	return nil
}
func (r *fakeReserver) ReservedOrder(context.Context, int64, int64) (int64, bool, error) {
	return 0, false, nil
}

type fakePublisher struct{ err error }

func (p fakePublisher) Publish(context.Context, []byte) error { return p.err }

func TestRefusedReservationsMapToContractErrors(t *testing.T) {
	for result, want := range map[core.ReservationResult]core.Code{
		core.VoucherMissing:   core.CodeVoucherNotFound,
		core.NotStarted:       core.CodeNotStarted,
		core.Ended:            core.CodeEnded,
		core.SoldOut:          core.CodeSoldOut,
		core.AlreadyPurchased: core.CodeAlreadyPurchased,
	} {
		s := core.NewSeckill(core.SeckillConfig{IDs: &counterIDs{}, Reserver: &fakeReserver{result: result}})
		_, err := s.Buy(context.Background(), 1, 1)
		if core.CodeOf(err) != want {
			t.Errorf("result %v: code %q, want %q", result, core.CodeOf(err), want)
		}
	}
}

func TestFullQueueReleasesTheReservationAndSaysBusy(t *testing.T) {
	r := &fakeReserver{}
	s := core.NewSeckill(core.SeckillConfig{IDs: &counterIDs{}, Reserver: r, Publisher: fakePublisher{err: core.ErrQueueFull}})
	_, err := s.Buy(context.Background(), 1, 1)
	if !errors.Is(err, core.ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
	if len(r.released) != 1 || r.released[0] != r.reserved[0] {
		t.Fatalf("released %v, want the reserved order %v", r.released, r.reserved)
	}
}

func TestFailedPublishReleasesTheReservation(t *testing.T) {
	r := &fakeReserver{}
	s := core.NewSeckill(core.SeckillConfig{IDs: &counterIDs{}, Reserver: r, Publisher: fakePublisher{err: errors.New("boom")}})
	_, err := s.Buy(context.Background(), 1, 1)
	if core.CodeOf(err) != core.CodeUnavailable || len(r.released) != 1 {
		t.Fatalf("err = %v, released %d: want unavailable and one release", err, len(r.released))
	}
}

type fakeRepo struct{ deleted []int64 }

func (f *fakeRepo) CreateVoucher(_ context.Context, v *core.Voucher) error { v.ID = 5; return nil }
func (f *fakeRepo) DeleteVoucher(_ context.Context, id int64) error {
	f.deleted = append(f.deleted, id)
	return nil
}
func (f *fakeRepo) FindVoucher(context.Context, int64) (core.Voucher, error) {
	return core.Voucher{}, core.ErrVoucherNotFound
}

type failingBoard struct{}

func (failingBoard) LoadVoucher(context.Context, core.Voucher) error { return errors.New("redis down") }
func (failingBoard) RemainingStock(context.Context, int64) (int64, error) {
	return 0, errors.New("redis down")
}

func TestVoucherThatCannotBeLoadedIsRolledBack(t *testing.T) {
	repo := &fakeRepo{}
	v := validVoucher()
	err := core.NewCatalog(core.CatalogConfig{Vouchers: repo, Board: failingBoard{}}).Create(context.Background(), &v)
	if core.CodeOf(err) != core.CodeUnavailable {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if len(repo.deleted) != 1 || repo.deleted[0] != 5 {
		t.Fatalf("deleted %v, want voucher 5 removed again", repo.deleted)
	}
}

func TestGetUnknownVoucherIsNotFound(t *testing.T) {
	_, err := core.NewCatalog(core.CatalogConfig{Vouchers: &fakeRepo{}, Board: failingBoard{}}).Get(context.Background(), 77)
	if !errors.Is(err, core.ErrVoucherNotFound) {
		t.Fatalf("err = %v, want ErrVoucherNotFound", err)
	}
}

// TestASaleWithoutRecoveryRunsOnTheStandIn: a use case given no recovery
// (its configuration's zero value) runs on NoRecovery, as one given it:
// every voucher trusted, nothing rebuilt, a voucher without live state not
// found, never a nil dereference. (A wiring with no recovery passes
// NoRecovery, never a nil *recovery.Guard.)
func TestASaleWithoutRecoveryRunsOnTheStandIn(t *testing.T) {
	for name, guard := range map[string]core.LiveGuard{"nil": nil, "NoRecovery": core.NoRecovery} {
		r := &fakeReserver{}
		s := core.NewSeckill(core.SeckillConfig{IDs: &counterIDs{}, Reserver: r, Recovery: guard})
		if id, err := s.Buy(context.Background(), 1, 7); err != nil || id != 1 || len(r.reserved) != 1 {
			t.Errorf("%s: buy = %d, %v (%d reserved); want order 1 reserved", name, id, err, len(r.reserved))
		}
		r.result = core.VoucherMissing
		if _, err := s.Buy(context.Background(), 2, 8); !errors.Is(err, core.ErrVoucherNotFound) {
			t.Errorf("%s: a voucher without live state: %v, want not found", name, err)
		}
		c := core.NewCatalog(core.CatalogConfig{Vouchers: nopVouchers{}, Board: nopBoard{}, Recovery: guard})
		if err := c.Create(context.Background(), &core.Voucher{Title: "t", PayValue: 1, ActualValue: 2, Stock: 1,
			BeginAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), EndAt: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}); err != nil {
			t.Errorf("%s: create: %v", name, err)
		}
	}
}

type nopVouchers struct{}

func (nopVouchers) CreateVoucher(_ context.Context, v *core.Voucher) error { v.ID = 1; return nil }
func (nopVouchers) DeleteVoucher(context.Context, int64) error             { return nil }
func (nopVouchers) FindVoucher(context.Context, int64) (core.Voucher, error) {
	return core.Voucher{}, core.ErrVoucherNotFound
}

type nopBoard struct{}

func (nopBoard) LoadVoucher(context.Context, core.Voucher) error      { return nil }
func (nopBoard) RemainingStock(context.Context, int64) (int64, error) { return 0, nil }

// lostReplyReserver's call failed as a whole: the reservation may or may
// not have been made, and it says so with the order id.
type lostReplyReserver struct{ fakeReserver }

func (r *lostReplyReserver) Reserve(_ context.Context, o core.Order) (core.Reservation, error) {
	return core.Reservation{}, fmt.Errorf("batch failed: %w", &core.UnconfirmedError{OrderID: o.ID})
}

// TestAReservationOfUnknownFateIsAnsweredWithItsOrderID: the shopper is
// told the order id to look up (503 unconfirmed), not a bare 503, and
// nothing is published for it.
func TestAReservationOfUnknownFateIsAnsweredWithItsOrderID(t *testing.T) {
	published := 0
	s := core.NewSeckill(core.SeckillConfig{IDs: &counterIDs{n: 41}, Reserver: &lostReplyReserver{},
		Publisher: countingPublisher{&published}})
	_, err := s.Buy(context.Background(), 1, 1)
	var uc *core.UnconfirmedError
	if !errors.As(err, &uc) || uc.OrderID != 42 {
		t.Fatalf("err = %v, want order 42 unconfirmed", err)
	}
	if published != 0 {
		t.Fatalf("%d published for a reservation of unknown fate", published)
	}
}

type countingPublisher struct{ n *int }

func (p countingPublisher) Publish(context.Context, []byte) error { *p.n++; return nil }

// alreadyHeldReserver answers already purchased with the held order, and
// counts its calls.
type alreadyHeldReserver struct {
	fakeReserver
	calls int
}

func (r *alreadyHeldReserver) Reserve(ctx context.Context, o core.Order) (core.Reservation, error) {
	r.calls++
	if r.calls == 1 {
		return r.fakeReserver.Reserve(ctx, o)
	}
	return core.Reservation{Result: core.AlreadyPurchased, OrderID: 1}, nil
}

// TestABuyerIsAnsweredFromMemory: once a shopper's reservation is made,
// their next requests for the voucher are answered 409 with the order id
// without asking the live store, until the memo forgets the voucher (a
// release); what the store then answers (already purchased) is remembered
// too. Another shopper is still asked.
func TestABuyerIsAnsweredFromMemory(t *testing.T) {
	r := &alreadyHeldReserver{}
	memo := core.NewAnswerMemo(time.Minute, nil)
	s := core.NewSeckill(core.SeckillConfig{IDs: &counterIDs{}, Reserver: r, Memo: memo})
	ctx := context.Background()
	if id, err := s.Buy(ctx, 7, 1); err != nil || id != 1 {
		t.Fatalf("first buy: %d, %v", id, err)
	}
	held := func(want int) {
		t.Helper()
		_, err := s.Buy(ctx, 7, 1)
		if id, ok := core.HeldOrderOf(err); !ok || id != 1 || core.CodeOf(err) != core.CodeAlreadyPurchased {
			t.Fatalf("a buyer again: %v, want already purchased with order 1", err)
		}
		if r.calls != want {
			t.Fatalf("the live store was asked %d times, want %d", r.calls, want)
		}
	}
	held(1)
	held(1)
	memo.Forget(1)
	held(2) // asked once more, then remembered again
	held(2)
	if _, err := s.Buy(ctx, 8, 1); r.calls != 3 {
		t.Fatalf("another shopper was not asked (%v)", err)
	}
}
