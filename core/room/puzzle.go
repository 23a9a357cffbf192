package room

import (
	"crypto/sha256"
	"encoding/base64"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Puzzle is the room's optional proof of work on joining
// (SECKILL_ROOM_POW_BITS): a challenge bound to the shopper and the
// voucher, solved by a nonce whose SHA-256 over "challenge:nonce" starts
// with Bits zero bits. It makes each place cost its holder CPU time, so
// one machine cannot hold thousands of places; it does nothing for a
// shopper with one account. The challenge is signed, so any instance
// checks a solution without a look-up.
type Puzzle struct {
	Bits int
	keys core.KeyRing
}

// PurposePuzzle is the puzzle keys' use of the deployment's secret.
var PurposePuzzle = core.Purpose{Label: "seckill room puzzle v2", Legacy: puzzleDomain}

// puzzleDomain derived the puzzle's key before HKDF
// (PurposePuzzle.Legacy).
const puzzleDomain = "seckill room puzzle v1"

// puzzleLifetime is how long a challenge may be solved and used.
const puzzleLifetime = 10 * time.Minute

// MaxPuzzleBits bounds Puzzle.Bits: each bit doubles the work.
const MaxPuzzleBits = 32

// NewPuzzle is a puzzle of bits (0: off) with keys derived from
// secret (SECKILL_JWT_SECRET) and previous (SECKILL_JWT_SECRET_PREVIOUS,
// while a secret rotates).
func NewPuzzle(secret []byte, bits int, previous ...[]byte) *Puzzle {
	return &Puzzle{Bits: bits, keys: core.NewKeyRing(PurposePuzzle, append([][]byte{secret}, previous...)...)}
}

// On reports whether joins need a solution.
func (p *Puzzle) On() bool { return p != nil && p.Bits > 0 }

func (p *Puzzle) sign(payload string) string {
	return base64.RawURLEncoding.EncodeToString(p.keys.Sign(payload))
}

// Challenge is a challenge for userID on voucherID, good until
// puzzleLifetime from now.
func (p *Puzzle) Challenge(voucherID, userID int64, now time.Time) string {
	payload := strconv.FormatInt(voucherID, 10) + "." + strconv.FormatInt(userID, 10) + "." +
		strconv.FormatInt(now.Add(puzzleLifetime).UnixMilli(), 10) + "." + strconv.Itoa(p.Bits)
	return payload + "." + p.sign(payload)
}

// ErrPuzzleRequired refuses a join without a valid solution.
var ErrPuzzleRequired = core.E(core.CodePuzzleRequired, "this room asks a proof of work to join: solve the challenge GET /api/vouchers/{id}/room gives and send it with the join")

// Check accepts a solution: challenge signed here for this shopper and
// voucher, unexpired, of at least the puzzle's bits, and nonce solving it.
func (p *Puzzle) Check(challenge, nonce string, voucherID, userID int64, now time.Time) error {
	cut := strings.LastIndexByte(challenge, '.')
	if cut < 0 || len(challenge) > 200 || len(nonce) == 0 || len(nonce) > 32 {
		return ErrPuzzleRequired
	}
	payload, sig := challenge[:cut], challenge[cut+1:]
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !p.keys.Verify(payload, mac) {
		return ErrPuzzleRequired
	}
	f := strings.Split(payload, ".")
	if len(f) != 4 || f[0] != strconv.FormatInt(voucherID, 10) || f[1] != strconv.FormatInt(userID, 10) {
		return ErrPuzzleRequired
	}
	expires, err1 := strconv.ParseInt(f[2], 10, 64)
	need, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || now.UnixMilli() >= expires || need < p.Bits {
		return ErrPuzzleRequired
	}
	if LeadingZeroBits(sha256.Sum256([]byte(challenge+":"+nonce))) < need {
		return ErrPuzzleRequired
	}
	return nil
}

// LeadingZeroBits counts the zero bits a digest starts with.
func LeadingZeroBits(sum [32]byte) int {
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// Solve finds a nonce for challenge by counting up: the work a client
// does (the lab's measure of a native solver; the storefront's is
// assets/pow.js).
func Solve(challenge string, zeroBits int) string {
	for n := 0; ; n++ {
		nonce := strconv.Itoa(n)
		if LeadingZeroBits(sha256.Sum256([]byte(challenge+":"+nonce))) >= zeroBits {
			return nonce
		}
	}
}
