package room

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// usesBoard records the positions whose admission was used.
type usesBoard struct {
	Board
	used []int64
}

func (b *usesBoard) Use(_ context.Context, _ core.Voucher, position int64) error {
	b.used = append(b.used, position)
	return nil
}

// answerBuyer answers every purchase with err, counting them.
type answerBuyer struct {
	err   error
	calls int
}

func (b *answerBuyer) Buy(context.Context, int64, int64) (int64, error) {
	b.calls++
	return 77, b.err
}

// multiRepo finds the vouchers it holds.
type multiRepo struct {
	core.VoucherRepository
	vs map[int64]core.Voucher
}

func (r multiRepo) FindVoucher(_ context.Context, id int64) (core.Voucher, error) {
	if v, ok := r.vs[id]; ok {
		return v, nil
	}
	return core.Voucher{}, core.ErrVoucherNotFound
}

// TestTheGateKeepsTheRoomsRule: one call buys through a room voucher only
// with the shopper's own valid pass, records the pass used when it bought
// or found the shopper's order (never when refused), and lets a plain
// voucher's purchase through untouched.
func TestTheGateKeepsTheRoomsRule(t *testing.T) {
	now := time.Now()
	roomV := core.Voucher{ID: 8, BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
		Room: &core.Room{OpensAt: now.Add(-time.Hour), AdmitPerSecond: 5, AdmissionTTL: 10 * time.Second}}
	plain := core.Voucher{ID: 9, BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour)}
	c := core.NewCatalog(core.CatalogConfig{Vouchers: multiRepo{vs: map[int64]core.Voucher{8: roomV, 9: plain}}, Board: stockBoard{}})
	passes := NewPassSigner([]byte("k"))
	own := passes.Token(Pass{VoucherID: 8, UserID: 3, Position: 4, Expires: now.Add(10 * time.Second)})
	others := passes.Token(Pass{VoucherID: 8, UserID: 5, Position: 6, Expires: now.Add(10 * time.Second)})
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		voucher  int64
		pass     string
		answer   error
		wantErr  error
		wantBuys int
		wantUsed []int64
	}{
		{"a room voucher without a pass", 8, "", nil, ErrNotAdmitted, 0, nil},
		{"another shopper's pass", 8, others, nil, ErrNotAdmitted, 0, nil},
		{"the shopper's pass", 8, own, nil, nil, 1, []int64{4}},
		{"the shopper's pass, already bought", 8, own, core.ErrAlreadyPurchased, core.ErrAlreadyPurchased, 1, []int64{4}},
		{"the shopper's pass, sold out", 8, own, core.ErrSoldOut, core.ErrSoldOut, 1, nil},
		{"a plain voucher", 9, "", nil, nil, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			board, buyer := &usesBoard{}, &answerBuyer{err: tc.answer}
			g := NewGate(New(Config{Board: board, Catalog: c, Passes: passes}), buyer)
			_, err := g.Buy(ctx, 3, tc.voucher, tc.pass)
			if !errors.Is(err, tc.wantErr) && !(err == nil && tc.wantErr == nil) {
				t.Fatalf("buy: %v, want %v", err, tc.wantErr)
			}
			if buyer.calls != tc.wantBuys || len(board.used) != len(tc.wantUsed) || (len(tc.wantUsed) > 0 && board.used[0] != tc.wantUsed[0]) {
				t.Fatalf("%d purchases, used %v; want %d and %v", buyer.calls, board.used, tc.wantBuys, tc.wantUsed)
			}
		})
	}
}
