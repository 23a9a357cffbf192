package room

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/seckill-lab/seckill/core"
)

// The draw's keys: what a room's seed, salts and beacon make of each
// shopper. core.Room holds the settings a voucher keeps; what is made of
// them is the room's own.

// DrawKey is a shopper's key in a draw keyed with the seed alone (no
// beacon, or a missed one): KeyIn(r, r.Seed, userID).
func DrawKey(r core.Room, userID int64) string { return KeyIn(r, r.Seed, userID) }

// MixedSeed is the seed the draw is keyed with when a beacon's randomness
// was read: SHA-256 of the seed's 32 bytes followed by the randomness.
func MixedSeed(r core.Room, randomness []byte) [32]byte {
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
// room without salts). The early joiners' places are their keys in
// ascending order, so a shopper who has the seed and their salt finds
// their own place among the published keys, and nobody else can tell
// whose a key is: with the seed public, keys over the ids alone named
// every early joiner (the security review mapped 30 of 30 by trying the
// ids 1 to 5000).
func KeyIn(r core.Room, seed [32]byte, userID int64) string {
	mac := hmac.New(sha256.New, seed[:])
	mac.Write(strconv.AppendInt(nil, userID, 10))
	if salt := Salt(r, userID); salt != "" {
		mac.Write([]byte(":" + salt))
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// Salt is the shopper's salt in the draw, shown to that shopper alone:
// hex of the first 16 bytes of HMAC-SHA256 keyed with SaltKey over the
// decimal user id ("" in a room without salts).
func Salt(r core.Room, userID int64) string {
	if len(r.SaltKey) == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, r.SaltKey)
	mac.Write(strconv.AppendInt(nil, userID, 10))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// KeyedWith says, for the published draw, what each key is the HMAC of;
// mixed, whether the beacon's randomness was mixed into the seed.
func KeyedWith(r core.Room, mixed bool) string {
	key := "seed"
	if mixed {
		key = "SHA-256(seed + beacon.randomness)"
	}
	if len(r.SaltKey) == 0 {
		return "HMAC-SHA256(" + key + ", userId)"
	}
	return "HMAC-SHA256(" + key + ", userId + \":\" + salt)"
}
