package oteltrace_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seckill-lab/seckill/adapters/oteltrace"
	"github.com/seckill-lab/seckill/core"
)

type nopStore struct{ saved int }

func (s *nopStore) SaveOrders(_ context.Context, orders []core.Order) (core.SaveResult, error) {
	s.saved += len(orders)
	return core.SaveResult{Created: len(orders)}, nil
}

type nopReturner struct{}

func (nopReturner) ReturnUnit(context.Context, core.Order) (core.ReturnResult, error) {
	return core.UnitReturned, nil
}

// TestTheWrappersSpanOnlyTracedOrders: the store's wrapper makes a batch
// span in the trace of the lone order's request, none for orders whose
// requests were not sampled (a trace leading to no request), and always
// calls through; the returner's span is named by the cancellation's
// reason, in the order's trace.
func TestTheWrappersSpanOnlyTracedOrders(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := oteltrace.New(tp.Tracer("test"))
	ctx, request := tp.Tracer("test").Start(context.Background(), "request")
	traced := core.Order{ID: 1, Trace: tr.Carry(ctx)}
	request.End()
	if traced.Trace == "" {
		t.Fatal("a sampled request's order carries no trace")
	}
	store := &nopStore{}
	wrapped := tr.Store(store, "persist orders", "streamgroup")
	if _, err := wrapped.SaveOrders(context.Background(), []core.Order{{ID: 2}}); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 1 {
		t.Fatalf("%d spans after an untraced batch, want only the request's", n)
	}
	if _, err := wrapped.SaveOrders(context.Background(), []core.Order{traced}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Returner(nopReturner{}).ReturnUnit(context.Background(), core.Order{ID: 1, Trace: traced.Trace, CancelReason: core.CancelShopper}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if store.saved != 2 || len(spans) != 3 {
		t.Fatalf("saved %d, %d spans; want 2 and 3", store.saved, len(spans))
	}
	for i, want := range []string{"persist orders", "order cancelled: shopper"} {
		s := spans[i+1]
		if s.Name() != want || s.SpanContext().TraceID() != request.SpanContext().TraceID() || s.Parent().SpanID() != request.SpanContext().SpanID() {
			t.Errorf("span %q (trace %s, parent %s), want %q the child of the request %s", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID(), want, request.SpanContext().SpanID())
		}
	}
}
