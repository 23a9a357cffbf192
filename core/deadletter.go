package core

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DeadLetter is the one record every backend keeps of a message it gave up
// on (Consumer.DeadLetter), whatever its transport, so one tool reads any
// backend's dead letters the same way.
type DeadLetter struct {
	// Body is the message exactly as it was delivered (usually an encoded
	// order; for poison, whatever arrived), at most MaxDeadLetterBody
	// bytes as read back.
	Body []byte
	// Reason is "<kind>: <detail>", the kind a DeadLetterReason.
	Reason string
	// Queue is the backend's name (SECKILL_QUEUE).
	Queue string
	// SourceID is the message's id on its backend ("" where it has none).
	SourceID string
	// Attempt counts the deliveries before it was given up.
	Attempt int
	// Consumer names the consumer that gave up on it.
	Consumer string
	// At is when, to the millisecond.
	At time.Time
	// Signature is the body's signature as it was delivered
	// (Delivery.Signature: an outside broker's order carries the
	// deployment's; "" elsewhere). A re-drive persists a body only where
	// it verifies (OrderSigner).
	Signature string
	// Seal is the deployment's signature of the whole record
	// (OrderSigner.SealDeadLetter), on the outside brokers, whose dead
	// streams anyone who reaches them can write: a record without a seal
	// that verifies has its reason and counts disbelieved.
	Seal string
	// Position is the record's place in its source (DeadLetterSource),
	// set when it is read back: a stream entry's id, a broker's sequence.
	Position string
}

// MaxDeadLetterBody is the most of a record's body kept when it is read
// back; maxDeadLetterText the most of any other field. An order is a few
// hundred bytes: what is longer is not one, and a reader keeps no more of
// it (the review's twenty 1 MB records took a server from 52 to 154 MB).
const (
	MaxDeadLetterBody = 64 << 10
	maxDeadLetterText = 4 << 10
)

// The field names of the encoded record. "order" is the name the order
// message has in the streams, so a dead letter's body reads like an entry's.
const (
	deadBody      = "order"
	deadReason    = "reason"
	deadQueue     = "queue"
	deadSource    = "source_id"
	deadAttempt   = "attempt"
	deadConsumer  = "consumer"
	deadAt        = "at"
	deadSignature = "signature"
	deadSeal      = "seal"
)

// Fields encodes the record as field/value pairs in a fixed order — a
// Redis stream entry's layout, and the form an in-process backend keeps:
// order, reason, queue, source_id, attempt (decimal), consumer, at (unix
// milliseconds, decimal), then signature and seal where the record has
// them.
func (d DeadLetter) Fields() []string {
	f := []string{
		deadBody, string(d.Body),
		deadReason, d.Reason,
		deadQueue, d.Queue,
		deadSource, d.SourceID,
		deadAttempt, strconv.Itoa(d.Attempt),
		deadConsumer, d.Consumer,
		deadAt, strconv.FormatInt(d.At.UnixMilli(), 10),
	}
	if d.Signature != "" {
		f = append(f, deadSignature, d.Signature)
	}
	if d.Seal != "" {
		f = append(f, deadSeal, d.Seal)
	}
	return f
}

// DecodeDeadLetter reads a record from its fields (a stream entry's
// values, a broker message's headers). It never fails: one record that
// does not read whole must not stop a reader of the ones after it (the
// review's header attempt=abc kept every later letter out of the
// register). Such a record is kept as poison, its detail saying what was
// wrong; a body past MaxDeadLetterBody is cut there and says so. Fields it
// does not know are ignored, so records written before a field existed,
// or by a newer version, still read.
func DecodeDeadLetter(fields map[string]string) DeadLetter {
	body := fields[deadBody]
	d := DeadLetter{Body: []byte(body[:min(len(body), MaxDeadLetterBody)]), Reason: clip(fields[deadReason]),
		Queue: clip(fields[deadQueue]), SourceID: clip(fields[deadSource]), Consumer: clip(fields[deadConsumer]),
		Signature: clip(fields[deadSignature]), Seal: clip(fields[deadSeal])}
	var wrong []string
	if _, ok := fields[deadBody]; !ok {
		wrong = append(wrong, `no body (field "order")`)
	}
	if len(body) > MaxDeadLetterBody {
		wrong = append(wrong, fmt.Sprintf("its body of %d bytes is cut at %d", len(body), MaxDeadLetterBody))
	}
	if d.Reason == "" {
		wrong = append(wrong, "no reason")
	}
	if v, ok := fields[deadAttempt]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			wrong = append(wrong, fmt.Sprintf("attempt %q is not a count", clip(v)))
		}
		d.Attempt = max(n, 0)
	}
	if v, ok := fields[deadAt]; ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			wrong = append(wrong, fmt.Sprintf("at %q is not unix milliseconds", clip(v)))
		} else {
			d.At = time.UnixMilli(ms).UTC()
		}
	}
	if len(wrong) > 0 {
		claimed := ""
		if d.Reason != "" {
			claimed = " (it said " + strconv.Quote(d.Reason) + ")"
		}
		d.Reason = string(DeadLetterPoison) + ": the dead-letter record does not read whole: " + strings.Join(wrong, "; ") + claimed
		d.Reason = clip(d.Reason)
	}
	return d
}

// clip cuts a record's text field at maxDeadLetterText bytes.
func clip(s string) string { return s[:min(len(s), maxDeadLetterText)] }

// FieldMap is Fields as a map, the form DecodeDeadLetter reads.
func (d DeadLetter) FieldMap() map[string]string {
	f := d.Fields()
	m := make(map[string]string, len(f)/2)
	for i := 0; i+1 < len(f); i += 2 {
		m[f[i]] = f[i+1]
	}
	return m
}

// DeadLetterOf is the record of delivery d, given up on now by consumer of
// queue for reason, with the signature it was delivered with.
func DeadLetterOf(queue, consumer string, d Delivery, reason string) DeadLetter {
	return DeadLetter{Body: d.Body, Reason: reason, Queue: queue, SourceID: d.ID,
		Attempt: d.Attempt, Consumer: consumer, At: time.Now().Truncate(time.Millisecond), Signature: d.Signature}
}

// TakeBack is what making a dead-lettered order's unit its own in the live
// sale did, before a re-drive persists the order. A letter's order keeps
// its unit while its buyer's mark names it; a rebuild that dealt the stock
// anew, or the return of a refused second order's unit, put the unit back
// on sale, and persisting the order then would sell it twice.
type TakeBack struct {
	Result TakeBackResult
	// Holder is the order the buyer holds instead (BuyerHoldsAnother).
	Holder int64
}

// TakeBackResult says whether a re-drive may persist the order.
type TakeBackResult int

const (
	// UnitHeld: the buyer's mark names the order; its unit is its own.
	UnitHeld TakeBackResult = iota
	// UnitTakenBack: its unit had gone back on sale; one was taken for it.
	UnitTakenBack
	// UnitGone: its unit went back on sale and none is left.
	UnitGone
	// BuyerHoldsAnother: the buyer holds another order of the voucher.
	BuyerHoldsAnother
	// TakeBackLater: the voucher's live state is fenced by a rebuild or
	// not loaded; a later re-drive tries again.
	TakeBackLater
)

// Persistable says a re-drive may persist the order: its unit is its own.
func (t TakeBack) Persistable() bool { return t.Result == UnitHeld || t.Result == UnitTakenBack }

// Why says, for the letter, why a re-drive skipped the order.
func (t TakeBack) Why() string {
	switch t.Result {
	case UnitGone:
		return "its unit went back on sale and none is left: the order cannot be persisted without overselling"
	case BuyerHoldsAnother:
		return fmt.Sprintf("its buyer holds order %d of the voucher", t.Holder)
	case TakeBackLater:
		return "the voucher's live state is being rebuilt: re-drive it again"
	}
	return ""
}
