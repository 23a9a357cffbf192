// Package bodysig signs and verifies request bodies the way every outside
// party of this project does (the code webhook, the payment sandbox): a
// header X-Seckill-Signature: sha256=<hex HMAC-SHA256 of the raw body>.
package bodysig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Header carries the signature.
const Header = "X-Seckill-Signature"

// Sign is the header's value for body.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Valid reports, in constant time, whether header is body's signature.
func Valid(secret, body []byte, header string) bool {
	return hmac.Equal([]byte(header), []byte(Sign(secret, body)))
}
