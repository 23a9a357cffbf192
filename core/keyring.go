package core

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
)

// Purpose names one use of the deployment's secret (SECKILL_JWT_SECRET):
// each has a key of its own, derived with HKDF-SHA256 under Label, so a
// key that leaks from one use (a room pass, a proof-of-work challenge, a
// broker message's signature) gives nothing of the others nor of the
// secret. Legacy is the label the use's key was derived under before HKDF
// (an HMAC of the secret): what an earlier version signed — an order still
// on a broker's queue, a pass in a shopper's hands — still verifies
// through an upgrade.
type Purpose struct {
	Label, Legacy string
}

// KeyRing is one purpose's keys: the current secret's signs; it and the
// previous secret's (SECKILL_JWT_SECRET_PREVIOUS, while a secret rotates)
// verify.
type KeyRing struct {
	sign   []byte
	verify [][]byte
}

// NewKeyRing derives p's keys from secrets, the current one first.
func NewKeyRing(p Purpose, secrets ...[]byte) KeyRing {
	var r KeyRing
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		k, err := hkdf.Key(sha256.New, s, nil, p.Label, sha256.Size)
		if err != nil {
			panic("core: hkdf: " + err.Error()) // only for a length past 255 blocks
		}
		if r.sign == nil {
			r.sign = k
		}
		r.verify = append(r.verify, k)
		if p.Legacy != "" {
			r.verify = append(r.verify, hmacSum(s, p.Legacy))
		}
	}
	return r
}

// hmacSum is HMAC-SHA256 keyed with key over message: a key derived from
// the server's secret for one use (message names the use), and the
// signatures made with it.
func hmacSum(key []byte, message string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(message))
	return mac.Sum(nil)
}

// Sign is message's HMAC-SHA256 under the signing key.
func (r KeyRing) Sign(message string) []byte { return hmacSum(r.sign, message) }

// Verify reports whether mac is message's under any of the ring's keys,
// each compared in constant time.
func (r KeyRing) Verify(message string, mac []byte) bool {
	ok := false
	for _, k := range r.verify {
		ok = hmac.Equal(hmacSum(k, message), mac) || ok
	}
	return ok
}

// PurposeOrderSignature is the broker messages' signatures of the
// deployment whose keys start with scope (SECKILL_KEY_PREFIX): two
// deployments that share a secret and a broker still reject each other's
// orders.
func PurposeOrderSignature(scope string) Purpose {
	return Purpose{Label: "seckill order message signature v2\x00" + scope, Legacy: orderSignatureScope + scope}
}
