package core

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// DeadLetter is the one record every backend keeps of a message it gave up
// on (Consumer.DeadLetter), whatever its transport, so one tool reads any
// backend's dead letters the same way.
type DeadLetter struct {
	// Body is the message exactly as it was delivered (usually an encoded
	// order; for poison, whatever arrived).
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
	// Position is the record's place in its source (DeadLetterSource),
	// set when it is read back: a stream entry's id, a broker's sequence.
	Position string
}

// The field names of the encoded record. "order" is the name the order
// message has in the streams, so a dead letter's body reads like an entry's.
const (
	deadBody     = "order"
	deadReason   = "reason"
	deadQueue    = "queue"
	deadSource   = "source_id"
	deadAttempt  = "attempt"
	deadConsumer = "consumer"
	deadAt       = "at"
)

// Fields encodes the record as field/value pairs in a fixed order — a
// Redis stream entry's layout, and the form an in-process backend keeps:
// order, reason, queue, source_id, attempt (decimal), consumer, at (unix
// milliseconds, decimal).
func (d DeadLetter) Fields() []string {
	return []string{
		deadBody, string(d.Body),
		deadReason, d.Reason,
		deadQueue, d.Queue,
		deadSource, d.SourceID,
		deadAttempt, strconv.Itoa(d.Attempt),
		deadConsumer, d.Consumer,
		deadAt, strconv.FormatInt(d.At.UnixMilli(), 10),
	}
}

// DecodeDeadLetter reads a record from its fields (a stream entry's
// values). The body and the reason are required; a field of the wrong form
// is an error. Fields it does not know are ignored, so records written
// before a field existed, or by a newer version, still read.
func DecodeDeadLetter(fields map[string]string) (DeadLetter, error) {
	body, ok := fields[deadBody]
	if !ok {
		return DeadLetter{}, errors.New("dead letter: no body (field \"order\")")
	}
	reason, ok := fields[deadReason]
	if !ok || reason == "" {
		return DeadLetter{}, errors.New("dead letter: no reason")
	}
	d := DeadLetter{Body: []byte(body), Reason: reason, Queue: fields[deadQueue],
		SourceID: fields[deadSource], Consumer: fields[deadConsumer]}
	if v, ok := fields[deadAttempt]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return DeadLetter{}, fmt.Errorf("dead letter: attempt %q is not a count", v)
		}
		d.Attempt = n
	}
	if v, ok := fields[deadAt]; ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return DeadLetter{}, fmt.Errorf("dead letter: at %q is not unix milliseconds", v)
		}
		d.At = time.UnixMilli(ms).UTC()
	}
	return d, nil
}

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
// queue for reason.
func DeadLetterOf(queue, consumer string, d Delivery, reason string) DeadLetter {
	return DeadLetter{Body: d.Body, Reason: reason, Queue: queue, SourceID: d.ID,
		Attempt: d.Attempt, Consumer: consumer, At: time.Now()}
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
