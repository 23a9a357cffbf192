// Package batchspan is the one rule for a span of work on a batch whose
// members come each from a request of its own: the reservation's batched
// script call (redisreserve), and a batch persisted, forwarded or
// re-driven (oteltrace).
package batchspan

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// Start starts the span of work on a batch; members are the span
// contexts of the members' requests (invalid where a member has none).
// No span where no member's request was sampled (it would be a trace of
// its own that leads to no request): span is then nil and ctx as given.
// The child of a lone member's request span; linked to each member's where
// there are several, since one call serves requests of many traces.
func Start(ctx context.Context, tracer trace.Tracer, name string, members []trace.SpanContext, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !anySampled(members) {
		return ctx, nil
	}
	if len(members) == 1 {
		ctx = trace.ContextWithSpanContext(ctx, members[0])
	} else {
		links := make([]trace.Link, 0, len(members))
		for _, sc := range members {
			if sc.IsValid() {
				links = append(links, trace.Link{SpanContext: sc})
			}
		}
		opts = append(opts, trace.WithLinks(links...))
	}
	return tracer.Start(ctx, name, opts...)
}

func anySampled(members []trace.SpanContext) bool {
	for _, sc := range members {
		if sc.IsSampled() {
			return true
		}
	}
	return false
}
