package room

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// TestASeatReadsAsTheShopperIsTold: how each place the live store holds
// is told to its shopper.
func TestASeatReadsAsTheShopperIsTold(t *testing.T) {
	now := time.Now()
	v := core.Voucher{ID: 7, BeginAt: now.Add(10 * time.Second), Room: &core.Room{AdmitPerSecond: 4, AdmissionTTL: time.Minute}}
	r := &Rooms{passes: NewPassSigner([]byte("k"))}
	cases := []struct {
		name  string
		seat  Seat
		state State
		pos   int64
		ahead int64
		wait  time.Duration
		pass  bool
	}{
		{"never joined", Seat{Now: now}, NotJoined, 0, -1, -1, false},
		{"early, before the draw", Seat{Joined: true, Now: now}, Waiting, 0, -1, 10 * time.Second, false},
		{"waiting", Seat{Joined: true, Position: 30, Frontier: 10, Now: now}, Waiting, 30, 19, 5 * time.Second, false},
		{"admitted", Seat{Joined: true, Position: 9, Frontier: 10, AdmittedAt: now.Add(-time.Second), Now: now}, Admitted, 9, -1, -1, true},
		{"admitted, sold out: keeps the admission", Seat{Joined: true, Position: 9, Frontier: 10, AdmittedAt: now, SoldOut: true, Now: now}, Admitted, 9, -1, -1, true},
		{"lapsed unused: the place is given up", Seat{Joined: true, Position: 9, Frontier: 10, AdmittedAt: now.Add(-2 * time.Minute), Now: now}, NotJoined, 0, -1, -1, false},
		{"lapsed after buying", Seat{Joined: true, Position: 9, Frontier: 10, AdmittedAt: now.Add(-2 * time.Minute), Used: true, Now: now}, Admitted, 9, -1, -1, false},
		{"waiting, sold out", Seat{Joined: true, Position: 30, Frontier: 10, SoldOut: true, Now: now}, SoldOut, 30, -1, -1, false},
	}
	for _, c := range cases {
		got := r.status(v, 42, c.seat)
		if got.State != c.state || got.Position != c.pos || got.Ahead != c.ahead || got.Wait != c.wait || (got.Pass != "") != c.pass {
			t.Errorf("%s: %+v; want %s at %d, %d ahead, wait %v, pass %v", c.name, got, c.state, c.pos, c.ahead, c.wait, c.pass)
		}
		if c.pass {
			if p, err := r.passes.Check(got.Pass, 7, 42, now); err != nil || p.Position != c.pos || !p.Expires.Equal(got.PassExpires) {
				t.Errorf("%s: the pass %+v does not check (%v)", c.name, p, err)
			}
		}
	}
}

// failingRepo answers every look-up with a database failure.
type failingRepo struct{ core.VoucherRepository }

func (failingRepo) FindVoucher(context.Context, int64) (core.Voucher, error) {
	return core.Voucher{}, errors.New("database down")
}

// TestASeckillIsNotLetThroughWhenTheVoucherCannotBeLookedUp: a voucher
// this instance has not seen, while the database fails, might be a room
// voucher: the pass check fails rather than letting the seckill through
// unchecked.
func TestASeckillIsNotLetThroughWhenTheVoucherCannotBeLookedUp(t *testing.T) {
	c := core.NewCatalog(core.CatalogConfig{Vouchers: failingRepo{}, Board: stockBoard{}})
	r := New(Config{Board: unusedRoomBoard{}, Catalog: c, Passes: NewPassSigner([]byte("k"))})
	if _, _, err := r.pass(context.Background(), 42, 7, ""); err == nil {
		t.Fatal("the pass check let a seckill through on a voucher it could not look up")
	}
}

// unusedRoomBoard is a room board the test never reaches.
type unusedRoomBoard struct{ Board }

// countingRepo counts its look-ups and has no voucher.
type countingRepo struct {
	core.VoucherRepository
	calls int
}

func (r *countingRepo) FindVoucher(context.Context, int64) (core.Voucher, error) {
	r.calls++
	return core.Voucher{}, core.ErrVoucherNotFound
}

// TestThePassCheckCostsNoLookUpForIDsAboveTheHighest: random voucher ids
// above the highest one (a scan for vouchers) cost the room check no
// query each, and an id it finds no voucher for is not remembered unknown
// by it (the seckill answers it, as before rooms).
func TestThePassCheckCostsNoLookUpForIDsAboveTheHighest(t *testing.T) {
	repo := &countingRepo{}
	highest := 0
	unknown := core.NewUnknownVouchers(time.Minute, func(context.Context) (int64, error) { highest++; return 100, nil })
	c := core.NewCatalog(core.CatalogConfig{Vouchers: repo, Board: stockBoard{}, Unknown: unknown})
	r := New(Config{Board: unusedRoomBoard{}, Catalog: c, Passes: NewPassSigner([]byte("k"))})
	for id := int64(101); id <= 200; id++ {
		if _, _, err := r.pass(context.Background(), 42, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	if repo.calls != 0 || highest != 1 {
		t.Fatalf("100 ids above the highest cost %d look-ups and %d reads of the highest, want 0 and 1", repo.calls, highest)
	}
	if _, _, err := r.pass(context.Background(), 42, 50, ""); err != nil || repo.calls != 1 {
		t.Fatalf("an id below the highest: %v, %d look-ups", err, repo.calls)
	}
	if unknown.Unknown(50) {
		t.Fatal("the room check remembered a voucher unknown: the seckill would answer 404 where Redis has it")
	}
}
