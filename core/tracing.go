package core

import "context"

// Tracing joins the work an order makes to the trace of the request that
// reserved it, across the queue and across processes: the request's trace
// context rides in the order's message (Order.Trace, W3C traceparent),
// and the consumer that persists the order continues that trace. A nil
// Tracing is none: no field in the message, no span, no work. The server
// implements it over OpenTelemetry; core knows only this seam.
type Tracing interface {
	// Carry is the traceparent of ctx's span to put in the order's
	// message, "" when there is none to carry (no span, or one not
	// sampled: its persistence would not be recorded either).
	Carry(ctx context.Context) string
	// Batch starts the span of work on a batch of orders from queue —
	// persisting them ("persist orders"), forwarding them to an outside
	// broker ("relay orders"): a child of the one order's request span,
	// or linked to each order's request span when the batch holds many.
	// end ends it, with the attempt's error.
	Batch(ctx context.Context, name, queue string, orders []Order) (traced context.Context, end func(error))
	// Follow starts the span of later work on an order — its payment,
	// the provider's notice, its cancellation or expiry and the unit it
	// returns — in the order's trace (the child of the request that
	// reserved it), linked to ctx's span, the request or duty doing the
	// work. An order without a trace gets a span in ctx's trace.
	Follow(ctx context.Context, name string, o Order) (traced context.Context, end func(error))
}
