package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Order is one user's purchase of one seckill voucher. Its ID comes from the
// ID worker before the reservation, so a retried reservation carries the same
// ID and can be recognised as a replay.
type Order struct {
	ID        int64
	UserID    int64
	VoucherID int64
	// CreatedAt is the reservation's time.
	CreatedAt time.Time

	// The lifecycle, as the database tells it (zero on the queue, where
	// every order is live): the status, the deadline to pay (zero: none,
	// for orders from before payments), and why a cancelled order was.
	Status       OrderStatus
	PayBy        time.Time
	CancelReason CancelReason

	// Trace is the W3C traceparent of the request that reserved the
	// order, carried in its message so its persistence joins that trace
	// (Tracing); "" without tracing, and from producers before it.
	Trace string

	// LimitCounted: the shopper's limit counted this request already
	// (ShopperLimit.Admit, before a look-up): the reservation does not
	// count it again. The request's, never encoded.
	LimitCounted bool
}

// TraceID is the trace id of the order's Trace (32 hex digits), "" when
// it has none: the key a log line about the order gives to find its trace.
func (o Order) TraceID() string {
	if len(o.Trace) != 55 {
		return ""
	}
	return o.Trace[3:35]
}

// Live reports whether the order holds its unit: queued, created or paid
// (an order whose status is not known yet is), or refunded with it kept.
func (o Order) Live() bool {
	return o.Status != StatusCancelled && (o.Status != StatusRefunded || o.CancelReason == CancelRefundedUnitKept)
}

// OrderStatus is where an order is in its lifecycle.
type OrderStatus string

const (
	// StatusQueued: reserved in Redis, not yet persisted.
	StatusQueued OrderStatus = "queued"
	// StatusHeld: a consumer dead-lettered it: the shopper was told 200,
	// the database does not have it, and an operator is to re-drive or
	// discard it (never queued or not found meanwhile).
	StatusHeld OrderStatus = "held"
	// StatusCreated: the row is in the database, unpaid (until PayBy).
	StatusCreated OrderStatus = "created"
	// StatusPaid: paid; the unit is the shopper's.
	StatusPaid OrderStatus = "paid"
	// StatusCancelled: cancelled (CancelReason says why); its unit went
	// back on sale.
	StatusCancelled OrderStatus = "cancelled"
	// StatusRefunded: paid after it was cancelled; the money went back.
	StatusRefunded OrderStatus = "refunded"
)

// CancelReason is why an order was cancelled.
type CancelReason string

const (
	// CancelExpired: unpaid past its deadline.
	CancelExpired CancelReason = "expired"
	// CancelShopper: the shopper cancelled it.
	CancelShopper CancelReason = "shopper"
	// CancelDiscarded: its dead letter was discarded by an operator: it
	// never reached the database, and its unit went back on sale.
	CancelDiscarded CancelReason = "discarded"
	// CancelRefunded: an operator refunded the paid order, its unit back
	// on sale (core/refund).
	CancelRefunded CancelReason = "operator"
	// CancelRefundedUnitKept: an operator refunded the paid order and
	// kept its unit sold.
	CancelRefundedUnitKept CancelReason = "operator_kept"
)

// orderMessage is the wire form of an Order on every queue. The order id is a
// string because it exceeds 2^53 and some consumers are not written in Go.
type orderMessage struct {
	ID        string `json:"id"`
	UserID    int64  `json:"userId"`
	VoucherID int64  `json:"voucherId"`
	CreatedAt int64  `json:"createdAt"` // unix milliseconds
	// Traceparent is Order.Trace, left out when empty.
	Traceparent string `json:"traceparent,omitempty"`
}

// EncodeOrder is the message body handed to a queue: the JSON of
// orderMessage. It is appended by hand because it runs on every seckill
// and holds only numbers, which need no escaping; a test holds it equal to
// json.Marshal's output.
func EncodeOrder(o Order) []byte { return appendOrder(make([]byte, 0, 96), o) }

// appendOrder appends EncodeOrder's body to b (OrderBody.Append: the
// reservation lays a batch member's body out on its own buffer).
func appendOrder(b []byte, o Order) []byte {
	b = append(b, `{"id":"`...)
	b = strconv.AppendInt(b, o.ID, 10)
	b = append(b, `","userId":`...)
	b = strconv.AppendInt(b, o.UserID, 10)
	b = append(b, `,"voucherId":`...)
	b = strconv.AppendInt(b, o.VoucherID, 10)
	b = append(b, `,"createdAt":`...)
	b = strconv.AppendInt(b, o.CreatedAt.UnixMilli(), 10)
	if o.Trace != "" {
		b = append(b, `,"traceparent":"`...)
		b = append(b, o.Trace...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// OrderBody is a format of the order message on the Redis queues
// (SECKILL_ORDER_BODY). DecodeOrder reads both, whichever the writer
// chose; the outside brokers' events are always OrderBodyJSON, the
// version their Seckill-Event-Version header names.
type OrderBody string

const (
	// OrderBodyJSON is version 1, EncodeOrder's JSON: what every version
	// of this service reads. Writers keep to it while instances of a
	// version before OrderBodyCompact still consume (a rolling upgrade).
	OrderBodyJSON OrderBody = "json"
	// OrderBodyCompact is version 2, EncodeOrderCompact's: about half the
	// bytes of the JSON for Redis to parse, store and send to each consumer.
	OrderBodyCompact OrderBody = "compact"
)

// ParseOrderBody reads a format's name.
func ParseOrderBody(name string) (OrderBody, error) {
	switch f := OrderBody(name); f {
	case OrderBodyJSON, OrderBodyCompact:
		return f, nil
	}
	return "", fmt.Errorf("order body %q: want %q or %q", name, OrderBodyJSON, OrderBodyCompact)
}

// Encode writes o in the format; the zero OrderBody is OrderBodyJSON.
func (f OrderBody) Encode(o Order) []byte { return f.Append(make([]byte, 0, 96), o) }

// Append appends the order's body in format f to b.
func (f OrderBody) Append(b []byte, o Order) []byte {
	if f == OrderBodyCompact {
		return appendOrderCompact(b, o)
	}
	return appendOrder(b, o)
}

// compactVersion starts a compact body: a JSON body starts with '{', and
// a later format gets the next digit.
const compactVersion = "2:"

// EncodeOrderCompact is the version 2 body: "2:" and the order id, user
// id, voucher id and creation time (unix milliseconds), in decimal,
// separated by ':' — "2:665485816507662337:1001:7:1795941009284" — and,
// when the order has one, its traceparent as a fifth field.
func EncodeOrderCompact(o Order) []byte { return appendOrderCompact(make([]byte, 0, 64), o) }

// appendOrderCompact appends EncodeOrderCompact's body to b.
func appendOrderCompact(b []byte, o Order) []byte {
	b = append(b, compactVersion...)
	b = strconv.AppendInt(b, o.ID, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, o.UserID, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, o.VoucherID, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, o.CreatedAt.UnixMilli(), 10)
	if o.Trace != "" {
		b = append(b, ':')
		b = append(b, o.Trace...)
	}
	return b
}

// DecodeOrder parses a message body, JSON (version 1) or compact (version
// 2), strictly: unknown fields, trailing data, missing or non-positive ids
// are errors, so a poison message is recognised here and never reaches
// the database.
func DecodeOrder(body []byte) (Order, error) {
	if rest, ok := bytes.CutPrefix(body, []byte(compactVersion)); ok {
		return decodeCompact(rest)
	}
	if o, ok := decodeCanonical(body); ok {
		return o, nil
	}
	return decodeStrict(body)
}

// decodeCompact reads a compact body after its version: four positive
// decimal integers separated by ':', then at most a traceparent (a fifth
// field of another form is an error: the compact body is only ever ours).
func decodeCompact(b []byte) (Order, error) {
	var fields [4]int64
	trace := ""
	for i := range fields {
		v, rest, ok := positiveInt(b)
		if !ok {
			return Order{}, fmt.Errorf("decode compact order message: field %d is not a positive integer", i+1)
		}
		fields[i] = v
		if i < len(fields)-1 {
			if rest, ok = bytes.CutPrefix(rest, []byte(":")); !ok {
				return Order{}, fmt.Errorf("decode compact order message: want 4 fields separated by ':'")
			}
		} else if tp, ok := bytes.CutPrefix(rest, []byte(":")); ok && validTraceparent(string(tp)) != "" {
			trace = string(tp)
		} else if len(rest) > 0 {
			return Order{}, fmt.Errorf("decode compact order message: trailing data")
		}
		b = rest
	}
	return Order{ID: fields[0], UserID: fields[1], VoucherID: fields[2], CreatedAt: time.UnixMilli(fields[3]).UTC(), Trace: trace}, nil
}

// validTraceparent is tp if it has the W3C traceparent's form (version
// 00: "00-" 32 hex digits "-" 16 hex digits "-" 2 hex digits, lower case),
// else "": a trace context that cannot be read is dropped, as the W3C
// recommendation says, and never costs the order.
func validTraceparent(tp string) string {
	if len(tp) != 55 || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	for i := 3; i < len(tp); i++ {
		if c := tp[i]; i != 35 && i != 52 && !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
	}
	return tp
}

// decodeCanonical reads exactly what EncodeOrder writes, and nothing else:
// the consumers decode every order, and encoding/json's reflection was most
// of their CPU. Any other form, valid or not, falls through to
// decodeStrict, so this only ever accepts a subset of what decodeStrict
// accepts, with the same result (a fuzz test holds both to that).
func decodeCanonical(b []byte) (Order, bool) {
	var o Order
	var ok bool
	if b, ok = bytes.CutPrefix(b, []byte(`{"id":"`)); !ok {
		return o, false
	}
	if o.ID, b, ok = positiveInt(b); !ok {
		return o, false
	}
	if b, ok = bytes.CutPrefix(b, []byte(`","userId":`)); !ok {
		return o, false
	}
	if o.UserID, b, ok = positiveInt(b); !ok {
		return o, false
	}
	if b, ok = bytes.CutPrefix(b, []byte(`,"voucherId":`)); !ok {
		return o, false
	}
	if o.VoucherID, b, ok = positiveInt(b); !ok {
		return o, false
	}
	if b, ok = bytes.CutPrefix(b, []byte(`,"createdAt":`)); !ok {
		return o, false
	}
	var ms int64
	if ms, b, ok = positiveInt(b); !ok {
		return o, false
	}
	o.CreatedAt = time.UnixMilli(ms).UTC()
	if tp, ok := bytes.CutPrefix(b, []byte(`,"traceparent":"`)); ok && len(tp) == 57 && string(tp[55:]) == `"}` {
		// Only a valid one: decodeStrict's answer for the others (drop
		// it, or refuse an escaped string) stays decodeStrict's.
		o.Trace = validTraceparent(string(tp[:55]))
		return o, o.Trace != ""
	}
	return o, string(b) == "}"
}

// positiveInt reads a decimal integer > 0 without sign or leading zero, as
// JSON and strconv both write it, and returns the rest of b.
func positiveInt(b []byte) (int64, []byte, bool) {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || b[0] == '0' || n > 19 {
		return 0, b, false
	}
	v, err := strconv.ParseInt(string(b[:n]), 10, 64)
	if err != nil {
		return 0, b, false
	}
	return v, b[n:], true
}

// decodeStrict is the general decoder: any JSON form of orderMessage, with
// a precise error for everything else.
func decodeStrict(body []byte) (Order, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var m orderMessage
	if err := dec.Decode(&m); err != nil {
		return Order{}, fmt.Errorf("decode order message: %w", err)
	}
	if dec.More() {
		return Order{}, fmt.Errorf("decode order message: trailing data")
	}
	id, err := strconv.ParseInt(m.ID, 10, 64)
	if err != nil || id <= 0 {
		return Order{}, fmt.Errorf("decode order message: bad order id %q", m.ID)
	}
	if m.UserID <= 0 || m.VoucherID <= 0 {
		return Order{}, fmt.Errorf("decode order message: user and voucher ids must be positive")
	}
	if m.CreatedAt <= 0 {
		return Order{}, fmt.Errorf("decode order message: missing createdAt")
	}
	return Order{ID: id, UserID: m.UserID, VoucherID: m.VoucherID, CreatedAt: time.UnixMilli(m.CreatedAt).UTC(),
		Trace: validTraceparent(m.Traceparent)}, nil
}

// OrdersOfVoucher decodes message bodies and keeps the orders of one
// voucher, for a queue's OrderHolder report. A body that does not decode is
// poison, on its way to the dead letters, and held for no voucher.
func OrdersOfVoucher(voucherID int64, bodies []string) []Order {
	var out []Order
	for _, b := range bodies {
		if o, err := DecodeOrder([]byte(b)); err == nil && o.VoucherID == voucherID {
			out = append(out, o)
		}
	}
	return out
}
