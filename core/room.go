package core

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"
)

// Room is a voucher's waiting room (Voucher.Room): shoppers join from
// OpensAt; at the voucher's BeginAt everyone who joined is ordered by a
// draw keyed with Seed, later joiners queue behind them in arrival order,
// and the room admits AdmitPerSecond places a second, each admission good
// for AdmissionTTL. Fixed at creation.
type Room struct {
	OpensAt        time.Time
	AdmitPerSecond int
	AdmissionTTL   time.Duration
	// Seed keys the draw. It is secret until the sale begins (only its
	// Commitment is shown), then published, so that anyone can check the
	// draw: never put it in an answer before BeginAt.
	Seed [32]byte
	// SaltKey keys each shopper's salt (Salt), over which with their id
	// their draw key is made: never published, so the published keys
	// name nobody. Nil for a room made before salts (keyed over the id
	// alone: KeyedWith says which).
	SaltKey []byte
	// Beacon, if named (On), is a public randomness beacon's round read
	// at the begin and mixed into the seed (MixedSeed): a value nobody
	// knew at creation, so that not even whoever chose the seed could
	// have chosen it to favour a shopper.
	Beacon RoomBeacon
}

// RoomBeacon names a public randomness beacon's round (drand's HTTP API:
// URL is a chain's base, e.g. https://api.drand.sh/<chain hash>; its
// round is read at URL/public/Round). The zero value names none.
type RoomBeacon struct {
	URL   string
	Round uint64
}

// On says whether a beacon is named.
func (b RoomBeacon) On() bool { return b.URL != "" }

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
	Randomness(ctx context.Context, b RoomBeacon) ([]byte, error)
}

// Bounds of a room's settings.
const (
	MaxAdmitPerSecond   = 100_000
	MinAdmissionTTL     = 5 * time.Second
	MaxAdmissionTTL     = time.Hour
	DefaultAdmissionTTL = time.Minute
)

// NewRoomSeed draws a room's seed from the system's secure source.
func NewRoomSeed() ([32]byte, error) {
	var seed [32]byte
	_, err := rand.Read(seed[:])
	return seed, err
}

// Commitment is the hex SHA-256 of the seed: shown from the room's
// opening, so that the seed published after the draw can be checked to be
// the one fixed before anyone joined.
func (r Room) Commitment() string {
	sum := sha256.Sum256(r.Seed[:])
	return hex.EncodeToString(sum[:])
}

// DrawKey is a shopper's key in a draw keyed with the seed alone (no
// beacon, or a missed one): KeyIn(r.Seed, userID).
func (r Room) DrawKey(userID int64) string { return r.KeyIn(r.Seed, userID) }

// MixedSeed is the seed the draw is keyed with when a beacon's randomness
// was read: SHA-256 of the seed's 32 bytes followed by the randomness.
func (r Room) MixedSeed(randomness []byte) [32]byte {
	h := sha256.New()
	h.Write(r.Seed[:])
	h.Write(randomness)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// KeyIn is a shopper's key in the draw keyed with seed (the room's, or
// MixedSeed): hex HMAC-SHA256 keyed with the seed's 32 bytes over the
// decimal user id, a colon and the shopper's salt (over the id alone in a
// room without salts). The early joiners' places
// are their keys in ascending order, so a shopper who has the seed and
// their salt finds their own place among the published keys, and nobody
// else can tell whose a key is: with the seed public, keys over the ids
// alone named every early joiner (the security review mapped 30 of 30 by
// trying the ids 1 to 5000).
func (r Room) KeyIn(seed [32]byte, userID int64) string {
	mac := hmac.New(sha256.New, seed[:])
	mac.Write(strconv.AppendInt(nil, userID, 10))
	if salt := r.Salt(userID); salt != "" {
		mac.Write([]byte(":" + salt))
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// Salt is the shopper's salt in the draw, shown to that shopper alone:
// hex of the first 16 bytes of HMAC-SHA256 keyed with SaltKey over the
// decimal user id ("" in a room without salts).
func (r Room) Salt(userID int64) string {
	if len(r.SaltKey) == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, r.SaltKey)
	mac.Write(strconv.AppendInt(nil, userID, 10))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// KeyedWith says, for the published draw, what each key is the HMAC of;
// mixed, whether the beacon's randomness was mixed into the seed.
func (r Room) KeyedWith(mixed bool) string {
	key := "seed"
	if mixed {
		key = "SHA-256(seed + beacon.randomness)"
	}
	if len(r.SaltKey) == 0 {
		return "HMAC-SHA256(" + key + ", userId)"
	}
	return "HMAC-SHA256(" + key + ", userId + \":\" + salt)"
}

// validate reports the first problem with a room for a sale that begins
// at begin.
func (r Room) validate(begin time.Time) error {
	switch {
	case r.OpensAt.IsZero():
		return E(CodeBadRequest, "room.opensAt is required")
	case !inSaleRange(r.OpensAt):
		return E(CodeBadRequest, "room.opensAt must be in UTC years 2000 to 2199")
	case !r.OpensAt.Before(begin):
		return E(CodeBadRequest, "room.opensAt must be before beginTime (shoppers join before the draw at the opening)")
	case r.AdmitPerSecond < 1 || r.AdmitPerSecond > MaxAdmitPerSecond:
		return E(CodeBadRequest, fmt.Sprintf("room.admitPerSecond must be from 1 to %d", MaxAdmitPerSecond))
	case r.AdmissionTTL < MinAdmissionTTL || r.AdmissionTTL > MaxAdmissionTTL:
		return E(CodeBadRequest, fmt.Sprintf("room.admissionTTL must be from %s to %s", MinAdmissionTTL, MaxAdmissionTTL))
	}
	return r.Beacon.validate()
}

// maxBeaconURL bounds a beacon's URL (a chain's base is under 120 bytes).
const maxBeaconURL = 512

// validate reports the first problem with a named beacon.
func (b RoomBeacon) validate() error {
	if !b.On() {
		if b.Round != 0 {
			return E(CodeBadRequest, "room.beacon.url is required with a round")
		}
		return nil
	}
	u, err := url.Parse(b.URL)
	switch {
	case len(b.URL) > maxBeaconURL || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return E(CodeBadRequest, fmt.Sprintf("room.beacon.url must be an http(s) URL of at most %d bytes, without credentials, query or fragment (a drand chain's base, e.g. https://api.drand.sh/<chain hash>)", maxBeaconURL))
	case b.Round == 0 || b.Round > math.MaxInt64:
		return E(CodeBadRequest, "room.beacon.round must be a round number from 1 (one published by beginTime)")
	}
	return nil
}

// RoomState is where a shopper stands in a room.
type RoomState string

const (
	RoomWaiting   RoomState = "waiting"
	RoomAdmitted  RoomState = "admitted"
	RoomSoldOut   RoomState = "sold_out"
	RoomNotJoined RoomState = "not_joined"
)

// RoomSeat is what the live store holds of one shopper in a room, read in
// one step.
type RoomSeat struct {
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

// RoomProgress is what one admission pass did to a room.
type RoomProgress struct {
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
func (p RoomProgress) Waiting() int64 { return p.Joined - p.Frontier }

// RoomBoard is the live store of the rooms (Redis): every call is one
// atomic step, safe to make from any number of instances at once.
type RoomBoard interface {
	// Join gives userID a place in v's room, or answers the one it holds
	// (a place whose admission lapsed unused is given up for one at the
	// back). ErrNotStarted before the room opens, ErrEnded after the sale.
	// drawSize is the saved draw's size where known (-1: not known; the
	// live store's own count is then the draw's).
	Join(ctx context.Context, v Voucher, userID, drawSize int64) error
	// Seat reads userID's place; read-only, a bounded number of reads
	// whatever the room's size.
	Seat(ctx context.Context, v Voucher, userID int64) (RoomSeat, error)
	// Admit makes one admission pass: at most the room's rate since the
	// last pass, plus one for each admission that lapsed unused, in
	// order; none while stockLeft is 0 or the draw's positions are not
	// all written. drawSize is as Join's.
	Admit(ctx context.Context, v Voucher, stockLeft, drawSize int64) (RoomProgress, error)
	// Use records that the admission of position was used for an order.
	Use(ctx context.Context, v Voucher, position int64) error
	// Close ends the early set once the sale has begun by the store's
	// clock and lists its joiners in arrival order (the store never
	// orders them by their keys); closed is false (and the list nil)
	// before. Closing again lists the same joiners.
	Close(ctx context.Context, v Voucher) (users []int64, closed bool, err error)
	// Place writes a draw's positions (made from Close's list, or kept
	// and put back after the store lost the room): the early joiners,
	// their positions and the draw's size, so that admission can start
	// and later joiners queue behind it. Idempotent; a place given since
	// is kept.
	Place(ctx context.Context, v Voucher, draw []DrawEntry) error
}

// DrawEntry is one early joiner in a draw: their key and who they are
// (the id is never published).
type DrawEntry struct {
	Key    string
	UserID int64
}

// KeptDraw is a room's draw as made and kept: the early joiners in order,
// and the beacon's randomness mixed into its seed (hex; "" the room names
// no beacon; BeaconMissed it could not be read).
type KeptDraw struct {
	Entries []DrawEntry
	Beacon  string
}

// RoomDrawStore keeps each room's draw once it is made (the database), so
// the published draw never changes and a live store that lost the room
// gets it back.
type RoomDrawStore interface {
	// SaveDraw keeps a room's draw; a draw already kept is kept as it is.
	SaveDraw(ctx context.Context, voucherID int64, draw KeptDraw) error
	// LoadDraw is the kept draw (no entries and no beacon: none kept).
	LoadDraw(ctx context.Context, voucherID int64) (KeptDraw, error)
}
