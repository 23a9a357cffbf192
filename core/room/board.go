package room

import (
	"context"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// BeaconMissed is a kept draw's beacon value when the room named a beacon
// that could not be read within BeaconWait of the begin: the draw is then
// keyed with the seed alone, and says so.
const BeaconMissed = "missed"

// BeaconWait is how long after the begin a room waits for its beacon's
// round before drawing without it (nobody is admitted meanwhile).
const BeaconWait = 30 * time.Second

// BeaconReader reads a beacon's round: its randomness (drand's
// "randomness", 32 bytes).
type BeaconReader interface {
	Randomness(ctx context.Context, b core.RoomBeacon) ([]byte, error)
}

// State is where a shopper stands in a room.
type State string

const (
	Waiting   State = "waiting"
	Admitted  State = "admitted"
	SoldOut   State = "sold_out"
	NotJoined State = "not_joined"
)

// Seat is what the live store holds of one shopper in a room, read in
// one step.
type Seat struct {
	// Joined: the shopper holds a place (an early join, or one at the
	// back).
	Joined bool
	// Position counts from 1; 0 while the draw has not been made (an
	// early joiner before the sale begins). It never changes once given.
	Position int64
	// Frontier is the last position admitted so far.
	Frontier int64
	// AdmittedAt is when the shopper's position was admitted (zero if it
	// was not); Used, whether an order was taken with it.
	AdmittedAt time.Time
	Used       bool
	// SoldOut: the room's last admission pass found no unit left.
	SoldOut bool
	// Now is the live store's clock at the read: admissions expire by it.
	Now time.Time
}

// Progress is what one admission pass did to a room.
type Progress struct {
	// Admitted is how many positions this pass admitted; Frontier the
	// last admitted position after it; Joined every position given.
	Admitted, Frontier, Joined int64
	// NoShows counts, since the opening, the admissions that lapsed
	// unused (each of which admitted one more while units were left).
	NoShows int64
	// Drawn is the draw's size as the live store holds it; Unplaced the
	// draw's positions it does not hold yet (nobody is admitted until
	// they are written: Rooms writes them after the pass).
	Drawn, Unplaced int64
	// SoldOut: no unit was left at this pass; SoldOutAt is when the room
	// first found none (zero: never).
	SoldOut   bool
	SoldOutAt time.Time
}

// Waiting is the number of places not yet admitted.
func (p Progress) Waiting() int64 { return p.Joined - p.Frontier }

// Board is the live store of the rooms (Redis): every call is one
// atomic step, safe to make from any number of instances at once.
type Board interface {
	// Join gives userID a place in v's room, or answers the one it holds
	// (a place whose admission lapsed unused is given up for one at the
	// back). ErrNotStarted before the room opens, ErrEnded after the sale.
	// drawSize is the saved draw's size where known (-1: not known; the
	// live store's own count is then the draw's).
	Join(ctx context.Context, v core.Voucher, userID, drawSize int64) error
	// Seat reads userID's place; read-only, a bounded number of reads
	// whatever the room's size.
	Seat(ctx context.Context, v core.Voucher, userID int64) (Seat, error)
	// Advance makes one admission pass: at most the room's rate since the
	// last pass, plus one for each admission that lapsed unused, in
	// order; none while stockLeft is 0 or the draw's positions are not
	// all written. drawSize is as Join's.
	Advance(ctx context.Context, v core.Voucher, stockLeft, drawSize int64) (Progress, error)
	// Use records that the admission of position was used for an order.
	Use(ctx context.Context, v core.Voucher, position int64) error
	// Close ends the early set once the sale has begun by the store's
	// clock and lists its joiners in arrival order (the store never
	// orders them by their keys); closed is false (and the list nil)
	// before. Closing again lists the same joiners.
	Close(ctx context.Context, v core.Voucher) (set Closed, closed bool, err error)
	// Place writes a draw's positions (made from Close's list, or kept
	// and put back after the store lost the room): the early joiners,
	// their positions and the draw's size, so that admission can start
	// and later joiners queue behind it. Idempotent; a place given since
	// is kept.
	Place(ctx context.Context, v core.Voucher, draw []DrawEntry) error
}

// Closed is the early set as the live store closed it: its joiners in
// arrival order, and how long after the begin it was first closed (-1:
// not known, a set closed before that was kept).
type Closed struct {
	Users []int64
	Late  time.Duration
}

// DrawEntry is one early joiner in a draw: their key and who they are
// (the id is never published).
type DrawEntry struct {
	Key    string
	UserID int64
}

// KeptDraw is a room's draw as made and kept: the early joiners in order,
// and the beacon's randomness mixed into its seed (hex; "" the room names
// no beacon; BeaconMissed it could not be read). Lost: no early join is
// known although there may have been some (LostAfter): published as such,
// never as an empty draw.
type KeptDraw struct {
	Entries []DrawEntry
	Beacon  string
	Lost    bool
}

// DrawStore keeps each room's draw once it is made (the database), so
// the published draw never changes and a live store that lost the room
// gets it back.
type DrawStore interface {
	// SaveDraw keeps a room's draw; a draw already kept is kept as it is.
	SaveDraw(ctx context.Context, voucherID int64, draw KeptDraw) error
	// LoadDraw is the kept draw (no entries and no beacon: none kept).
	LoadDraw(ctx context.Context, voucherID int64) (KeptDraw, error)
}
