package core

import (
	"context"
	"encoding/hex"
	"time"
)

// A room's draw is made in the live store at the opening, and kept in the
// database by the first admission pass after it (Rooms.keepDraw): from
// then on the draw published is the one kept, whatever the live store
// loses, and a live store that lost the room gets the draw back.

// Draw is the voucher's published draw; not_started before the sale
// begins.
func (r *Rooms) Draw(ctx context.Context, voucherID int64) (RoomDraw, error) {
	if d, ok := r.published.Load(voucherID); ok {
		return d.(RoomDraw), nil
	}
	v, err := r.roomOf(ctx, voucherID)
	if err != nil {
		return RoomDraw{}, err
	}
	draw, drawn, err := r.drawOf(ctx, v)
	if err != nil {
		return RoomDraw{}, Wrap("room draw", CodeUnavailable, err)
	}
	if !drawn {
		return RoomDraw{}, E(CodeNotStarted, "the draw is published when the sale begins, at "+v.BeginAt.UTC().Format(time.RFC3339))
	}
	keys := make([]string, len(draw))
	for i, e := range draw {
		keys[i] = e.Key
	}
	d := RoomDraw{Seed: hex.EncodeToString(v.Room.Seed[:]), Commitment: v.Room.Commitment(), KeyedWith: v.Room.KeyedWith(), Keys: keys}
	r.published.Store(voucherID, d)
	return d, nil
}

// drawOf is the room's draw: the one kept, else the live store's (then
// kept, and read back: if another instance kept one first, that one).
func (r *Rooms) drawOf(ctx context.Context, v Voucher) ([]DrawEntry, bool, error) {
	if saved, ok := r.saved.Load(v.ID); ok {
		return saved.([]DrawEntry), true, nil
	}
	if r.draws != nil {
		kept, err := r.draws.LoadDraw(ctx, v.ID)
		if err != nil {
			return nil, false, err
		}
		if len(kept) > 0 {
			r.saved.Store(v.ID, kept)
			return kept, true, nil
		}
	}
	live, drawn, err := r.board.Draw(ctx, v)
	if err != nil || !drawn || r.draws == nil {
		return live, drawn, err
	}
	if err := r.draws.SaveDraw(ctx, v.ID, live); err != nil {
		return nil, false, err
	}
	kept, err := r.draws.LoadDraw(ctx, v.ID)
	if err != nil {
		return nil, false, err
	}
	if len(kept) == 0 {
		kept = live // nobody joined early: nothing to keep
	}
	r.saved.Store(v.ID, kept)
	return kept, true, nil
}

// keepDraw, after an admission pass, keeps the room's draw (the first
// pass after the opening does) and, where the live store holds less of
// it than was kept (it lost the room), puts it back.
func (r *Rooms) keepDraw(ctx context.Context, v Voucher, p RoomProgress) error {
	if r.draws == nil {
		return nil
	}
	draw, drawn, err := r.drawOf(ctx, v)
	if err != nil || !drawn || p.Drawn >= int64(len(draw)) {
		return err
	}
	r.log.Warn("room: the live store lost the room's draw; putting the kept one back", "voucher", v.ID,
		"live", p.Drawn, "kept", len(draw))
	return r.board.Restore(ctx, v, draw)
}
