package core

import "context"

// TraceCarrier joins the work an order makes to the trace of the request
// that reserved it, across the queue and across processes: the request's
// trace context rides in the order's message (Order.Trace, W3C
// traceparent), and whatever later works on the order — the consumer that
// persists it, the relay that forwards it, its payment, its cancellation —
// continues that trace. Those spans are the server's wrappers of the
// parts core calls (adapters/oteltrace, added at wiring); core itself
// only carries the trace into the order.
type TraceCarrier interface {
	// Carry is the traceparent of ctx's span to put in the order's
	// message, "" when there is none to carry (no span, or one not
	// sampled: its persistence would not be recorded either).
	Carry(ctx context.Context) string
}

// NoTrace carries nothing: no field in the message, no work.
var NoTrace TraceCarrier = noTrace{}

type noTrace struct{}

func (noTrace) Carry(context.Context) string { return "" }
