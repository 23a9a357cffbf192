// Package brokerevent is what the outside-broker backends (nats, kafka,
// rabbitmq) put on the wire besides the order itself: the headers every
// order event carries, the names of the broker's streams, topics and
// queues, and the dead-letter record as headers. Outside consumers read the
// same (docs/architecture.md, "Order events for other services").
package brokerevent

import (
	"maps"
	"strconv"
	"strings"

	"github.com/seckill-lab/seckill/core"
)

// Version is the event format's version, in the VersionHeader of every
// order event. The body is core.EncodeOrder's JSON; a change a consumer
// must know of (a compact body, a new required field) comes with a new
// version.
const Version = "1"

// Header names of an order event.
const (
	VersionHeader = "Seckill-Event-Version"
	// OrderHeader is the order id, decimal: the key to deduplicate by.
	OrderHeader = "Seckill-Order-Id"
	// VoucherHeader is the voucher id, decimal.
	VoucherHeader = "Seckill-Voucher-Id"
	// KindHeader says what happened; "order.reserved" is the one kind.
	KindHeader = "Seckill-Event"
	// Reserved is the kind of an order a shopper was answered 200 for.
	Reserved = "order.reserved"
	// SignatureHeader carries the deployment's signature of the body
	// (core.OrderSigner): the consumers persist no order without it.
	SignatureHeader = "Seckill-Signature"
	// TraceHeader is the W3C trace context of the request that reserved
	// the order (core.Order.Trace, also in the body), where the broker's
	// own tooling and other services' instrumentation look for it; absent
	// when the order has none.
	TraceHeader = "traceparent"
)

// Event is an order event as it goes on the wire: its body
// (core.EncodeOrder) and headers, the body signed when signer is set.
func Event(o core.Order, signer *core.OrderSigner) ([]byte, map[string]string) {
	body := core.EncodeOrder(o)
	headers := Headers(o)
	if signer != nil {
		headers[SignatureHeader] = signer.Sign(body)
	}
	return body, headers
}

// Headers are an order event's headers.
func Headers(o core.Order) map[string]string {
	h := map[string]string{
		VersionHeader: Version,
		KindHeader:    Reserved,
		OrderHeader:   strconv.FormatInt(o.ID, 10),
		VoucherHeader: strconv.FormatInt(o.VoucherID, 10),
	}
	if o.Trace != "" {
		h[TraceHeader] = o.Trace
	}
	return h
}

// Name derives a broker object's name from the key prefix and a suffix:
// "seckill:" and "orders" give "seckill_orders". Every character but
// letters, digits, '-' and '_' becomes '_', so the name is valid as a
// JetStream stream, a subject token, a Kafka topic and a RabbitMQ queue.
func Name(keyPrefix, suffix string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, keyPrefix+suffix)
}

// DeadLetterHeaders are a dead letter's fields but its body, which is the
// message's payload; sealed by signer (the deployment's, where it has one),
// since anyone who reaches the broker can write its dead stream too.
func DeadLetterHeaders(d core.DeadLetter, signer *core.OrderSigner) map[string]string {
	if signer != nil {
		d = signer.SealDeadLetter(d)
	}
	m := d.FieldMap()
	delete(m, "order")
	return m
}

// DecodeDeadLetter reads a dead letter back from its payload and headers:
// a record that does not read whole is poison (core.DecodeDeadLetter), and
// with signer only what verifies is believed (core.OrderSigner's
// BelieveDeadLetter).
func DecodeDeadLetter(body []byte, headers map[string]string, signer *core.OrderSigner) core.DeadLetter {
	m := maps.Clone(headers)
	if m == nil {
		m = map[string]string{}
	}
	m["order"] = string(body)
	d := core.DecodeDeadLetter(m)
	if signer != nil {
		d = signer.BelieveDeadLetter(d)
	}
	return d
}
