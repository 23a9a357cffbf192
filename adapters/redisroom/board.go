// Package redisroom keeps the vouchers' waiting rooms in Redis
// (core.RoomBoard): a join, a poll, an admission pass and the draw are
// each one script (lua/room_*.lua) over the room's keys, which carry the
// voucher's shard tag, so a room lies in one cluster slot and any number
// of instances share it.
//
// A place is a field, or a rank, never a scan: an early joiner's is the
// rank of their draw key among the early joiners' (a sorted set whose
// members, "<key>:<user id>", all score 0, so Redis orders them by the
// key's bytes, which is the keys' ascending hex order), written into the
// places hash by the admission passes once the draw is made (a rank in a
// sorted set of 100,000 cost Redis 8.5 times one of 1,000, a field 3.3
// times: measured, docs/results.md); a later joiner's is the early
// joiners' count plus their arrival number. Admission is a frontier: every
// position up to it is admitted, each pass recorded once with its time.
package redisroom

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// keep is how long a room's keys outlive its sale: its places, passes and
// draw are read after the end (a shopper's last poll, the draw checked).
const keep = 24 * time.Hour

// settlePerPass bounds the lapsed passes one admission pass settles (the
// rest wait for the next pass, a fifth of a second on).
const settlePerPass = 64

// placePerCall bounds the early joiners' positions one script call writes
// (a few milliseconds of Redis); an admission pass calls again until the
// draw is written, at most placeCalls times.
const (
	placePerCall = 2000
	placeCalls   = 100
)

// Board is the rooms' live store.
type Board struct {
	rdb                              redis.UniversalClient
	prefix                           string
	shards                           core.Shards
	join, seat, admit, draw, restore *redis.Script
}

// New keeps the rooms in rdb under prefix, each room's keys under its
// voucher's shard tag (shards must have at least one shard).
func New(rdb redis.UniversalClient, prefix string, shards core.Shards) *Board {
	if shards.Count() == 0 {
		panic("redisroom: New needs the sale's shards")
	}
	return &Board{rdb: rdb, prefix: prefix, shards: shards, join: redis.NewScript(lua.RoomJoin),
		seat: redis.NewScript(lua.RoomSeat), admit: redis.NewScript(lua.RoomAdmit), draw: redis.NewScript(lua.RoomDraw),
		restore: redis.NewScript(lua.RoomRestore)}
}

// keys are the room's state, early joiners, places at the back, passes
// and used positions (the scripts' KEYS order).
func (b *Board) keys(voucherID int64) (state, early, late, admitted, used string) {
	state = b.prefix + "room:{" + b.shards.TagOf(voucherID) + "}:" + strconv.FormatInt(voucherID, 10)
	return state, state + ":early", state + ":places", state + ":admitted", state + ":used"
}

// member is the shopper's member in the draw: their key, then their id
// (the key orders it; the id lets a pass write the position by user).
func member(r *core.Room, userID int64) string {
	return r.DrawKey(userID) + ":" + strconv.FormatInt(userID, 10)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// Join implements core.RoomBoard.
func (b *Board) Join(ctx context.Context, v core.Voucher, userID, drawSize int64) error {
	state, early, late, admitted, used := b.keys(v.ID)
	r := v.Room
	res, err := b.join.Run(ctx, b.rdb, []string{state, early, late, admitted, used},
		userID, member(r, userID), ms(r.OpensAt), ms(v.BeginAt), ms(v.EndAt), r.AdmissionTTL.Milliseconds(),
		ms(v.EndAt.Add(keep)), drawSize).Int64Slice()
	if err != nil {
		return fmt.Errorf("redisroom: join: %w", err)
	}
	switch res[0] {
	case 1:
		return core.ErrNotStarted
	case 2:
		return core.ErrEnded
	}
	return nil
}

// Seat implements core.RoomBoard.
func (b *Board) Seat(ctx context.Context, v core.Voucher, userID int64) (core.RoomSeat, error) {
	state, early, late, admitted, used := b.keys(v.ID)
	res, err := b.seat.Run(ctx, b.rdb, []string{state, early, late, admitted, used},
		userID, member(v.Room, userID), ms(v.BeginAt)).Int64Slice()
	if err != nil {
		return core.RoomSeat{}, fmt.Errorf("redisroom: seat: %w", err)
	}
	seat := core.RoomSeat{Joined: res[0] == 1, Position: res[1], Frontier: res[2], Used: res[4] == 1,
		SoldOut: res[5] == 1, Now: time.UnixMilli(res[6])}
	if res[3] > 0 {
		seat.AdmittedAt = time.UnixMilli(res[3])
	}
	return seat, nil
}

// Admit implements core.RoomBoard.
func (b *Board) Admit(ctx context.Context, v core.Voucher, stockLeft int64) (core.RoomProgress, error) {
	state, early, places, admitted, used := b.keys(v.ID)
	r := v.Room
	var p core.RoomProgress
	var res []int64
	for call := 0; call == 0 || (res[6] > 0 && call < placeCalls); call++ {
		var err error
		res, err = b.admit.Run(ctx, b.rdb, []string{state, early, admitted, used, places},
			r.AdmitPerSecond, r.AdmissionTTL.Milliseconds(), ms(v.BeginAt), stockLeft, ms(v.EndAt.Add(keep)),
			settlePerPass, placePerCall).Int64Slice()
		if err != nil {
			return core.RoomProgress{}, fmt.Errorf("redisroom: admit: %w", err)
		}
		p.Admitted += res[0]
	}
	p.Frontier, p.Joined, p.NoShows, p.SoldOut, p.Drawn = res[1], res[2], res[3], res[4] == 1, res[7]
	if res[5] > 0 {
		p.SoldOutAt = time.UnixMilli(res[5])
	}
	return p, nil
}

// Use implements core.RoomBoard.
func (b *Board) Use(ctx context.Context, v core.Voucher, position int64) error {
	_, _, _, _, used := b.keys(v.ID)
	if err := b.rdb.ZAdd(ctx, used, redis.Z{Score: float64(position), Member: position}).Err(); err != nil {
		return fmt.Errorf("redisroom: use: %w", err)
	}
	return nil
}

// Draw implements core.RoomBoard.
func (b *Board) Draw(ctx context.Context, v core.Voucher) ([]core.DrawEntry, bool, error) {
	state, early, _, _, _ := b.keys(v.ID)
	res, err := b.draw.Run(ctx, b.rdb, []string{state, early}, ms(v.BeginAt)).Slice()
	if err != nil {
		return nil, false, fmt.Errorf("redisroom: draw: %w", err)
	}
	if len(res) == 0 || res[0] != int64(1) {
		return nil, false, nil
	}
	draw := make([]core.DrawEntry, 0, len(res)-1)
	for _, m := range res[1:] {
		s, _ := m.(string)
		key, id, ok := strings.Cut(s, ":")
		user, err := strconv.ParseInt(id, 10, 64)
		if !ok || err != nil || len(key) != 64 {
			return nil, false, fmt.Errorf("redisroom: draw: a member %q", s)
		}
		draw = append(draw, core.DrawEntry{Key: key, UserID: user})
	}
	return draw, true, nil
}

// restoreChunk is the entries one restore call carries.
const restoreChunk = 1000

// Restore implements core.RoomBoard.
func (b *Board) Restore(ctx context.Context, v core.Voucher, draw []core.DrawEntry) error {
	state, early, places, _, _ := b.keys(v.ID)
	for from := 0; from < len(draw) || from == 0; from += restoreChunk {
		args := []any{len(draw), ms(v.EndAt.Add(keep))}
		for i, e := range draw[from:min(from+restoreChunk, len(draw))] {
			args = append(args, e.Key+":"+strconv.FormatInt(e.UserID, 10), e.UserID, from+i+1)
		}
		if err := b.restore.Run(ctx, b.rdb, []string{state, early, places}, args...).Err(); err != nil {
			return fmt.Errorf("redisroom: restore: %w", err)
		}
	}
	return nil
}

var _ core.RoomBoard = (*Board)(nil)
