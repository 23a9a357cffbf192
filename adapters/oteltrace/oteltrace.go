// Package oteltrace records the sale's work on an order in the trace of
// the request that reserved it, over OpenTelemetry, by wrapping the parts
// core calls where the server wires them (as River's otelriver wraps its
// client): the store a batch is persisted or re-driven into, an outside
// broker's forwarder, the live store a cancelled order's unit returns to,
// and the payments' store. Core only carries the request's trace into the
// order (Carry: core.TraceCarrier).
package oteltrace

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-lab/seckill/adapters/internal/batchspan"
	"github.com/seckill-lab/seckill/core"
)

// traceparentKey is the W3C header (and message field) the trace context
// rides in.
const traceparentKey = "traceparent"

// Tracer starts the sale's spans with tracer. Over a tracer that records
// nothing (OpenTelemetry's noop) every wrapper costs a call and no work:
// an order carries no trace, so no batch span starts.
type Tracer struct{ tracer trace.Tracer }

// New is a Tracer over tracer.
func New(tracer trace.Tracer) *Tracer { return &Tracer{tracer: tracer} }

// Carry is core.TraceCarrier's: the traceparent of ctx's span, if sampled.
func (t *Tracer) Carry(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier[traceparentKey]
}

// Batch starts the span of one attempt on a batch of orders from queue
// (batchspan's rule over the orders' requests); end ends it with the
// attempt's error.
func (t *Tracer) Batch(ctx context.Context, name, queue string, orders []core.Order) (context.Context, func(error)) {
	members := make([]trace.SpanContext, len(orders))
	for i, o := range orders {
		members[i] = remote(o.Trace)
	}
	ctx, span := batchspan.Start(ctx, t.tracer, name, members, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("messaging.system", queue), attribute.Int("messaging.batch.message_count", len(orders))))
	if span == nil {
		return ctx, func(error) {}
	}
	return ctx, ender(span)
}

// Follow starts the span of later work on an order in the order's trace
// (the child of the request that reserved it), linked to ctx's span, the
// request or duty doing the work; in ctx's trace for an order without one.
func (t *Tracer) Follow(ctx context.Context, name string, o core.Order) (context.Context, func(error)) {
	opts := []trace.SpanStartOption{trace.WithAttributes(attribute.Int64("seckill.order.id", o.ID))}
	if sc := remote(o.Trace); sc.IsValid() {
		if here := trace.SpanContextFromContext(ctx); here.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: here}))
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := t.tracer.Start(ctx, name, opts...)
	return ctx, ender(span)
}

// ender ends span with the work's error, if any.
func ender(span trace.Span) func(error) {
	return func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// remote reads a message's traceparent (an invalid one is no span).
func remote(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{traceparentKey: traceparent})
	return trace.SpanContextFromContext(ctx)
}
