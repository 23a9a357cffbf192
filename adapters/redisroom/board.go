// Package redisroom keeps the vouchers' waiting rooms in Redis
// (room.Board): a join, a poll, an admission pass and the draw are
// each one script (lua/room_*.lua) over the room's keys, which carry the
// voucher's shard tag, so a room lies in one cluster slot and any number
// of instances share it.
//
// A place is a field, never a rank or a scan (a rank in a sorted set of
// 100,000 cost Redis 8.5 times one of 1,000, a field 3.3 times: measured,
// docs/results.md). Redis holds the early joiners by arrival only: the
// server closes the set at the begin (Close), orders the joiners by their
// draw keys, keeps the draw and writes their positions (Place); until
// every position is written nobody is admitted. A later joiner's place is
// the early joiners' count plus their arrival number. Admission is a
// frontier: every position up to it is admitted, each pass recorded once
// with its time.
package redisroom

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/room"
	"github.com/seckill-lab/seckill/lua"
)

// keep is how long a room's keys outlive its sale: its places, passes and
// draw are read after the end (a shopper's last poll, the draw checked).
const keep = 24 * time.Hour

// settlePerPass bounds the lapsed passes one admission pass settles (the
// rest wait for the next pass, a fifth of a second on).
const settlePerPass = 64

// Board is the rooms' live store.
type Board struct {
	rdb                             redis.UniversalClient
	prefix                          string
	shards                          core.Shards
	join, seat, admit, close, place *redis.Script
}

// New keeps the rooms in rdb under prefix, each room's keys under its
// voucher's shard tag (shards must have at least one shard).
func New(rdb redis.UniversalClient, prefix string, shards core.Shards) *Board {
	if shards.Count() == 0 {
		panic("redisroom: New needs the sale's shards")
	}
	return &Board{rdb: rdb, prefix: prefix, shards: shards, join: redis.NewScript(lua.RoomJoin),
		seat: redis.NewScript(lua.RoomSeat), admit: redis.NewScript(lua.RoomAdmit), close: redis.NewScript(lua.RoomClose),
		place: redis.NewScript(lua.RoomPlace)}
}

// keys are the room's state, early joiners, places at the back, passes
// and used positions (the scripts' KEYS order).
func (b *Board) keys(voucherID int64) (state, early, late, admitted, used string) {
	state = b.prefix + "room:{" + b.shards.TagOf(voucherID) + "}:" + strconv.FormatInt(voucherID, 10)
	return state, state + ":early", state + ":places", state + ":admitted", state + ":used"
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// Join implements room.Board.
func (b *Board) Join(ctx context.Context, v core.Voucher, userID, drawSize int64) error {
	state, early, late, admitted, used := b.keys(v.ID)
	r := v.Room
	res, err := b.join.Run(ctx, b.rdb, []string{state, early, late, admitted, used},
		userID, ms(r.OpensAt), ms(v.BeginAt), ms(v.EndAt), r.AdmissionTTL.Milliseconds(),
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

// Seat implements room.Board.
func (b *Board) Seat(ctx context.Context, v core.Voucher, userID int64) (room.Seat, error) {
	state, early, late, admitted, used := b.keys(v.ID)
	res, err := b.seat.Run(ctx, b.rdb, []string{state, early, late, admitted, used}, userID).Int64Slice()
	if err != nil {
		return room.Seat{}, fmt.Errorf("redisroom: seat: %w", err)
	}
	seat := room.Seat{Joined: res[0] == 1, Position: res[1], Frontier: res[2], Used: res[4] == 1,
		SoldOut: res[5] == 1, Now: time.UnixMilli(res[6])}
	if res[3] > 0 {
		seat.AdmittedAt = time.UnixMilli(res[3])
	}
	return seat, nil
}

// Advance implements room.Board.
func (b *Board) Advance(ctx context.Context, v core.Voucher, stockLeft, drawSize int64) (room.Progress, error) {
	state, early, places, admitted, used := b.keys(v.ID)
	r := v.Room
	res, err := b.admit.Run(ctx, b.rdb, []string{state, early, admitted, used, places},
		r.AdmitPerSecond, r.AdmissionTTL.Milliseconds(), ms(v.BeginAt), stockLeft, ms(v.EndAt.Add(keep)),
		settlePerPass, drawSize).Int64Slice()
	if err != nil {
		return room.Progress{}, fmt.Errorf("redisroom: admit: %w", err)
	}
	p := room.Progress{Admitted: res[0], Frontier: res[1], Joined: res[2], NoShows: res[3], SoldOut: res[4] == 1,
		Unplaced: res[6], Drawn: res[7]}
	if res[5] > 0 {
		p.SoldOutAt = time.UnixMilli(res[5])
	}
	return p, nil
}

// Use implements room.Board.
func (b *Board) Use(ctx context.Context, v core.Voucher, position int64) error {
	_, _, _, _, used := b.keys(v.ID)
	if err := b.rdb.ZAdd(ctx, used, redis.Z{Score: float64(position), Member: position}).Err(); err != nil {
		return fmt.Errorf("redisroom: use: %w", err)
	}
	return nil
}

// Close implements room.Board.
func (b *Board) Close(ctx context.Context, v core.Voucher) (room.Closed, bool, error) {
	state, early, _, _, _ := b.keys(v.ID)
	res, err := b.close.Run(ctx, b.rdb, []string{state, early}, ms(v.BeginAt), ms(v.EndAt.Add(keep))).Slice()
	if err != nil {
		return room.Closed{}, false, fmt.Errorf("redisroom: close: %w", err)
	}
	if len(res) < 2 || res[0] != int64(1) {
		return room.Closed{}, false, nil
	}
	late, _ := res[1].(int64)
	out := room.Closed{Users: make([]int64, 0, len(res)-2), Late: time.Duration(late) * time.Millisecond}
	if late < 0 {
		out.Late = -1
	}
	for _, m := range res[2:] {
		s, _ := m.(string)
		user, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return room.Closed{}, false, fmt.Errorf("redisroom: close: a member %q", s)
		}
		out.Users = append(out.Users, user)
	}
	return out, true, nil
}

// placeChunk is the positions one place call writes (a few milliseconds
// of Redis).
const placeChunk = 1000

// Place implements room.Board.
func (b *Board) Place(ctx context.Context, v core.Voucher, draw []room.DrawEntry) error {
	state, early, places, _, _ := b.keys(v.ID)
	for from := 0; from < len(draw) || from == 0; from += placeChunk {
		args := []any{len(draw), ms(v.EndAt.Add(keep))}
		for i, e := range draw[from:min(from+placeChunk, len(draw))] {
			args = append(args, e.UserID, from+i+1)
		}
		if err := b.place.Run(ctx, b.rdb, []string{state, early, places}, args...).Err(); err != nil {
			return fmt.Errorf("redisroom: place: %w", err)
		}
	}
	return nil
}

var _ room.Board = (*Board)(nil)
