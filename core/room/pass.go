package room

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Pass is an admission out of a room: the shopper, the voucher, the
// admitted position and when the admission lapses. Its token is signed,
// so any instance checks it without a look-up.
type Pass struct {
	VoucherID, UserID, Position int64
	Expires                     time.Time
}

// PassSigner signs and checks the passes' tokens with a key of the
// server's (HMAC-SHA256).
type PassSigner struct {
	keys core.KeyRing
}

// PurposePass is the pass keys' use of the deployment's secret.
var PurposePass = core.Purpose{Label: "seckill room pass v2", Legacy: passDomain}

// passDomain derived the pass key before HKDF (PurposePass.Legacy):
// a pass is never a login token, nor a login token a pass.
const passDomain = "seckill room pass v1"

// NewPassSigner derives the pass keys from secrets (SECKILL_JWT_SECRET,
// then SECKILL_JWT_SECRET_PREVIOUS if set).
func NewPassSigner(secrets ...[]byte) *PassSigner {
	return &PassSigner{keys: core.NewKeyRing(PurposePass, secrets...)}
}

// ErrNotAdmitted refuses a seckill on a room voucher without a valid
// admission of the shopper's.
var ErrNotAdmitted = core.E(core.CodeNotAdmitted, "this voucher sells through a waiting room: join it (POST /api/vouchers/{id}/room) and send the admission it gives in the X-Seckill-Admission header")

// Token is the pass as the shopper sends it: its fields in decimal, then
// the signature, dot-separated.
func (s *PassSigner) Token(p Pass) string {
	payload := strconv.FormatInt(p.VoucherID, 10) + "." + strconv.FormatInt(p.UserID, 10) + "." +
		strconv.FormatInt(p.Position, 10) + "." + strconv.FormatInt(p.Expires.UnixMilli(), 10)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.sign(payload))
}

func (s *PassSigner) sign(payload string) []byte { return s.keys.Sign(payload) }

// Check reads token as a pass for userID on voucherID, valid at now:
// ErrNotAdmitted for anything else (missing, forged, another shopper's or
// voucher's, lapsed).
func (s *PassSigner) Check(token string, voucherID, userID int64, now time.Time) (Pass, error) {
	cut := strings.LastIndexByte(token, '.')
	if cut < 0 || len(token) > 200 {
		return Pass{}, ErrNotAdmitted
	}
	payload, sig := token[:cut], token[cut+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !s.keys.Verify(payload, got) {
		return Pass{}, ErrNotAdmitted
	}
	fields := strings.Split(payload, ".")
	if len(fields) != 4 {
		return Pass{}, ErrNotAdmitted
	}
	var n [4]int64
	for i, f := range fields {
		if n[i], err = strconv.ParseInt(f, 10, 64); err != nil {
			return Pass{}, ErrNotAdmitted
		}
	}
	p := Pass{VoucherID: n[0], UserID: n[1], Position: n[2], Expires: time.UnixMilli(n[3])}
	if p.VoucherID != voucherID || p.UserID != userID || !now.Before(p.Expires) {
		return Pass{}, ErrNotAdmitted
	}
	return p, nil
}
