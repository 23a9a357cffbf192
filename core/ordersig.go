package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// OrderSigner proves an order message this deployment's. An outside
// broker (NATS, Kafka, RabbitMQ) can be written by anyone who reaches it;
// an order published there by anyone else must never become a persisted
// order (the outside review's forged order became one, for a user who never
// logged in, and MySQL's stock fell while Redis's did not). The relay signs
// each message's body with a key every process of the deployment derives
// from settings they already share (NewOrderSigner), and the pipeline
// dead-letters a delivery whose signature does not verify
// (DeadLetterUnauthenticated).
type OrderSigner struct{ key []byte }

// orderSignatureScope separates the key from every other use of the
// secret it is derived from (the shoppers' tokens).
const orderSignatureScope = "seckill order message signature v1\x00"

// NewOrderSigner derives the signing key from secret (the deployment's
// SECKILL_JWT_SECRET) and scope (its key prefix, so two deployments that
// share a secret and a broker still reject each other's orders).
func NewOrderSigner(secret []byte, scope string) *OrderSigner {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(orderSignatureScope + scope))
	return &OrderSigner{key: mac.Sum(nil)}
}

// Sign is the signature of an order message's body: hex HMAC-SHA256.
func (s *OrderSigner) Sign(body []byte) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// Valid reports whether signature is body's, in constant time.
func (s *OrderSigner) Valid(body []byte, signature string) bool {
	got, err := hex.DecodeString(signature)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, s.key)
	mac.Write(body)
	return hmac.Equal(mac.Sum(nil), got)
}
