package core

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type countingLister struct {
	calls    int
	vouchers []Voucher
}

func (l *countingLister) CurrentVouchers(context.Context, time.Time, int) ([]Voucher, error) {
	l.calls++
	return l.vouchers, nil
}

// board is live stock by voucher; a negative stock is a read that fails
// for the moment (Redis busy).
type board map[int64]int64

func (b board) LoadVoucher(context.Context, Voucher) error { return nil }
func (b board) RemainingStock(_ context.Context, id int64) (int64, error) {
	s, ok := b[id]
	switch {
	case !ok:
		return 0, ErrVoucherNotFound
	case s < 0:
		return 0, ErrBusy
	}
	return s, nil
}

// TestTheListingIsSharedForASecond: however many storefronts ask, the
// stores are listed once per second; each voucher carries its live stock,
// and one no longer found is left out.
func TestTheListingIsSharedForASecond(t *testing.T) {
	l := &countingLister{vouchers: []Voucher{{ID: 1, Title: "a", Stock: 10}, {ID: 2, Title: "b", Stock: 5}, {ID: 3, Title: "gone"}}}
	live := board{1: 7, 2: 0}
	c := NewCatalog(CatalogConfig{Vouchers: unusedRepo{}, Board: live, Lister: l})
	now := time.Unix(1_800_000_000, 0)
	c.now = func() time.Time { return now }
	for range 100 {
		got, err := c.Current(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Stock != 7 || got[1].Stock != 0 {
			t.Fatalf("listing %+v, want vouchers 1 and 2 with their live stock", got)
		}
	}
	if l.calls != 1 {
		t.Fatalf("100 storefronts within a second listed the store %d times, want 1", l.calls)
	}
	live[1] = 6
	now = now.Add(time.Second)
	got, _ := c.Current(context.Background())
	if l.calls != 2 || got[0].Stock != 6 {
		t.Fatalf("a second later: %d listings, stock %d; want a fresh listing with stock 6", l.calls, got[0].Stock)
	}
	// A stock read that fails for the moment keeps the voucher with its
	// last listed stock; a voucher never listed stays out until its stock
	// reads.
	l.vouchers = append(l.vouchers, Voucher{ID: 4, Title: "new"})
	live[1], live[4] = -1, -1
	now = now.Add(time.Second)
	got, _ = c.Current(context.Background())
	if len(got) != 2 || got[0].ID != 1 || got[0].Stock != 6 || got[1].ID != 2 {
		t.Fatalf("with voucher 1's stock unreadable: %+v, want vouchers 1 (stock 6, as last listed) and 2", got)
	}
	live[1], live[4] = 5, 3
	now = now.Add(time.Second)
	got, _ = c.Current(context.Background())
	if len(got) != 3 || got[0].Stock != 5 || got[2].ID != 4 || got[2].Stock != 3 {
		t.Fatalf("once every stock reads: %+v", got)
	}
}

// unusedRepo is a repository the test never reaches (the listing fills
// the catalog's cache): any call panics.
type unusedRepo struct{ VoucherRepository }

// slowRepo counts its look-ups, each taking a while.
type slowRepo struct {
	VoucherRepository
	calls atomic.Int64
}

func (r *slowRepo) FindVoucher(_ context.Context, id int64) (Voucher, error) {
	r.calls.Add(1)
	time.Sleep(50 * time.Millisecond)
	return Voucher{ID: id, Title: "v"}, nil
}

// TestTheFirstLookUpsOfAVoucherAreOneQuery: a crowd's first requests for
// a voucher this instance has not seen (the opening second) cost the
// database one query, not one each.
func TestTheFirstLookUpsOfAVoucherAreOneQuery(t *testing.T) {
	repo := &slowRepo{}
	c := NewCatalog(CatalogConfig{Vouchers: repo, Board: board{}})
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := c.Details(context.Background(), 7); err != nil || v.ID != 7 {
				t.Errorf("Details = %+v, %v", v, err)
			}
		}()
	}
	wg.Wait()
	if n := repo.calls.Load(); n != 1 {
		t.Fatalf("100 concurrent first look-ups made %d queries, want 1", n)
	}
}
