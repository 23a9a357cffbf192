package core

import (
	"encoding/hex"
	"strconv"
	"strings"
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
type OrderSigner struct{ keys KeyRing }

// orderSignatureScope derived the key before HKDF
// (PurposeOrderSignature's Legacy).
const orderSignatureScope = "seckill order message signature v1\x00"

// NewOrderSigner derives the signing keys from secret (the deployment's
// SECKILL_JWT_SECRET, and previous: SECKILL_JWT_SECRET_PREVIOUS while it
// rotates, so orders still on the broker verify) and scope (its key
// prefix, so two deployments that share a secret and a broker still reject
// each other's orders).
func NewOrderSigner(secret []byte, scope string, previous ...[]byte) *OrderSigner {
	return &OrderSigner{keys: NewKeyRing(PurposeOrderSignature(scope), append([][]byte{secret}, previous...)...)}
}

// Sign is the signature of an order message's body: hex HMAC-SHA256.
func (s *OrderSigner) Sign(body []byte) string {
	return hex.EncodeToString(s.keys.Sign(string(body)))
}

// Valid reports whether signature is body's, in constant time.
func (s *OrderSigner) Valid(body []byte, signature string) bool {
	got, err := hex.DecodeString(signature)
	return err == nil && s.keys.Verify(string(body), got)
}

// deadLetterSealScope separates a record's seal from an order's signature:
// a body signature can never pass for a seal.
const deadLetterSealScope = "seckill dead letter seal v1\x00"

// SealDeadLetter signs the whole record (every field but the seal), for a
// dead stream anyone who reaches the broker can write: a record read back
// is believed only as far as it verifies (BelieveDeadLetter).
func (s *OrderSigner) SealDeadLetter(d DeadLetter) DeadLetter {
	d.Seal = s.seal(d)
	return d
}

// sealed is what a record's seal signs: every field but the seal, each
// length-prefixed (no two records encode alike), after the scope.
func sealed(d DeadLetter) string {
	d.Seal = ""
	var b strings.Builder
	b.WriteString(deadLetterSealScope)
	for _, f := range d.Fields() {
		b.WriteString(strconv.Itoa(len(f)) + ":" + f)
	}
	return b.String()
}

func (s *OrderSigner) seal(d DeadLetter) string { return hex.EncodeToString(s.keys.Sign(sealed(d))) }

// BelieveDeadLetter is what of a record read back from an outside
// broker's dead stream is believed. The body's signature is checked before
// anything else: a body this deployment did not sign is unauthenticated,
// whatever the record claims (the review's record published straight to
// the dead-letter queue with reason=stock_anomaly was re-driven into an
// order for a user who never logged in). A signed body in a record whose
// seal does not verify — the broker's own dead-lettering (RabbitMQ's
// x-delivery-limit), or headers someone else wrote — keeps its body, but
// not its reason or counts: it is max_deliveries, saying so.
func (s *OrderSigner) BelieveDeadLetter(d DeadLetter) DeadLetter {
	claimed := strconv.Quote(d.Reason[:min(len(d.Reason), 200)])
	seal, err := hex.DecodeString(d.Seal)
	isSealed := err == nil && s.keys.Verify(sealed(d), seal)
	switch {
	case isSealed && strings.HasPrefix(d.Reason, string(DeadLetterUnauthenticated)+":"):
		// Our consumer's own verdict on a message someone else published.
	case !s.Valid(d.Body, d.Signature):
		d.Reason = string(DeadLetterUnauthenticated) + ": the body does not carry this deployment's signature: not an order of ours (the record said " + claimed + ")"
	case !isSealed:
		d.Reason = string(DeadLetterTooManyTries) + ": given up by the broker, or recorded by someone else: the record is not sealed by this deployment, so only its signed body is believed (it said " + claimed + ")"
		d.Attempt, d.Consumer = 0, ""
	}
	return d
}
