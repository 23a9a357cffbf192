package room

import (
	"context"
	"errors"

	"github.com/seckill-lab/seckill/core"
)

// Buyer is the purchase a Gate lets through (*core.Seckill).
type Buyer interface {
	Buy(ctx context.Context, userID, voucherID int64) (int64, error)
}

// Gate is a purchase's one way in: a voucher sold through a room is
// bought only with its shopper's pass, and the pass is then recorded used
// (its admission is not a no-show); a plain voucher is bought as it is.
// The rule lives here, not in the HTTP handler, so that every way in
// keeps it and a purchase looks the voucher up once.
type Gate struct {
	rooms *Rooms
	buyer Buyer
}

// NewGate lets purchases through buyer, checked by rooms.
func NewGate(rooms *Rooms, buyer Buyer) *Gate { return &Gate{rooms: rooms, buyer: buyer} }

// Buy buys voucherID for userID, with pass the shopper's admission token
// ("" where they sent none): ErrNotAdmitted on a room voucher without a
// valid one, else what the purchase answers.
func (g *Gate) Buy(ctx context.Context, userID, voucherID int64, pass string) (int64, error) {
	v, p, err := g.rooms.pass(ctx, userID, voucherID, pass)
	if err != nil {
		return 0, err
	}
	id, err := g.buyer.Buy(ctx, userID, voucherID)
	if p.Position > 0 && (err == nil || errors.Is(err, core.ErrAlreadyPurchased)) {
		g.rooms.used(ctx, v, p)
	}
	return id, err
}
