package core

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/url"
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
