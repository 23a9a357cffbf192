package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/core"
)

// TestOneOrderMakesOneTraceOnEveryBackend: with a tracer provider (the
// SDK's in-memory exporter), one purchase on every backend and stack makes
// one trace: the HTTP request's span, the reservation script's span in it
// (the batch's call, or the script call itself), and the consumer's
// persistence — a child of the request's span, in the same trace, though
// the order crossed the queue (and, for the outside brokers, the relay)
// with nothing but its message. Under sync the request persists the order
// itself: its SQL is in the request's trace. An outside broker's relay
// forwards it in the trace too. The order's payment and the
// sandbox's notice, requests of their own, are in that trace too; and a
// shopper's cancellation of another order, with the unit it returns, in
// that order's.
func TestOneOrderMakesOneTraceOnEveryBackend(t *testing.T) {
	for _, b := range builtinBackends {
		configs := map[string]func(*Config){b.Name: func(c *Config) { c.Queue = b.Name }}
		for _, v := range b.Variants {
			configs[v.Name] = func(c *Config) { c.Queue = b.Name; v.Configure(c) }
		}
		for name, configure := range configs {
			for _, stack := range []string{"embedded", "real"} {
				t.Run(name+"/"+stack, func(t *testing.T) {
					spans := tracetest.NewInMemoryExporter()
					tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
					t.Cleanup(func() { tp.Shutdown(context.Background()) })
					h := startServerOpts(t, stack, configure, []Option{WithTracerProvider(tp)}, nil)
					checkOneTrace(t, h, spans)
				})
			}
		}
	}
}

func checkOneTrace(t *testing.T, h *harness, spans *tracetest.InMemoryExporter) {
	t.Helper()
	voucher := h.openVoucher(5)
	status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(3), nil)
	if status != 200 {
		t.Fatalf("buy: %d %v", status, body)
	}
	if n := h.waitForRows(voucher, 1, 30*time.Second); n != 1 {
		t.Fatalf("%d rows, want the order persisted", n)
	}
	var request trace.SpanContext
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		all := spans.GetSpans()
		request = findSpan(all, func(s tracetest.SpanStub) bool {
			return s.SpanKind == trace.SpanKindServer && strings.HasSuffix(s.Name, "/seckill")
		}).SpanContext
		got = spansIn(all, request.TraceID())
		script := h.cfg.Queue == "sync" || hasSpan(got, "seckill batch") || hasSpan(got, "evalsha") || hasSpan(got, "eval")
		persisted := hasSpan(got, "persist orders") || (h.cfg.Queue == "sync" && hasSpanPrefix(got, "INSERT"))
		if request.IsValid() && script && persisted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the purchase's trace holds %v; want the request, the script and the persistence (all spans: %v)",
				got, spanNames(all))
		}
	}
	t.Logf("the purchase's trace: %v", got)
	if h.cfg.Queue != "sync" {
		persist := findSpan(spans.GetSpans(), func(s tracetest.SpanStub) bool { return s.Name == "persist orders" })
		if persist.Parent.TraceID() != request.TraceID() || !hasSpanPrefix(got, "INSERT") {
			t.Fatalf("the persistence %v is not in the request's trace with its SQL (%v)", persist.Parent, got)
		}
	}
	if h.srv.queue != nil && core.CapabilitiesOf(h.srv.queue).Relay != nil {
		waitForSpanIn(t, spans, request.TraceID(), "relay orders") // the outbox to the broker
	}
	if h.cfg.Queue == "kafka" { // franz-go's kotel, on the relay's producer and the consumers
		topic := kafkaqueue.TopicName(h.cfg.KeyPrefix)
		waitForSpanIn(t, spans, request.TraceID(), topic+" publish")
		waitForSpanIn(t, spans, request.TraceID(), topic+" receive")
	}
	payAndCancel(t, h, voucher, body["orderId"].(string))
	for _, want := range []string{"pay order", "payment notice"} {
		waitForSpanIn(t, spans, request.TraceID(), want)
	}
	var cancelled tracetest.SpanStub
	for deadline := time.Now().Add(10 * time.Second); !cancelled.SpanContext.IsValid(); time.Sleep(50 * time.Millisecond) {
		cancelled = findSpan(spans.GetSpans(), func(s tracetest.SpanStub) bool { return s.Name == "order cancelled: shopper" })
		if time.Now().After(deadline) {
			t.Fatalf("no span of the cancellation: %v", spanNames(spans.GetSpans()))
		}
	}
	if id := cancelled.SpanContext.TraceID(); id == request.TraceID() || !hasSpan(spansIn(spans.GetSpans(), id), "/api/vouchers/:id/seckill") {
		t.Fatalf("the cancellation is not in its order's trace: %v", spansIn(spans.GetSpans(), id))
	}
}

// payAndCancel pays the order through the sandbox, and has another
// shopper buy and cancel.
func payAndCancel(t *testing.T, h *harness, voucher int64, order string) {
	t.Helper()
	status, pay := h.do("POST", "/api/orders/"+order+"/pay", h.shopper(3), nil)
	if status != 200 {
		t.Fatalf("pay: %d %v", status, pay)
	}
	if status, done := h.do("POST", "/api/payments/sandbox/"+pay["paymentId"].(string)+"/complete", "",
		map[string]string{"status": "succeeded"}); status != 200 || done["result"] != "paid" {
		t.Fatalf("the sandbox's notice: %d %v", status, done)
	}
	status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(4), nil)
	if status != 200 {
		t.Fatalf("the second buy: %d %v", status, body)
	}
	h.waitForRows(voucher, 2, 30*time.Second)
	if status, out := h.do("POST", "/api/orders/"+body["orderId"].(string)+"/cancel", h.shopper(4), nil); status != 200 {
		t.Fatalf("cancel: %d %v", status, out)
	}
}

// waitForSpanIn waits for a span named name in trace id.
func waitForSpanIn(t *testing.T, spans *tracetest.InMemoryExporter, id trace.TraceID, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if hasSpan(spansIn(spans.GetSpans(), id), name) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q span in the order's trace: %v", name, spansIn(spans.GetSpans(), id))
		}
	}
}

func findSpan(all tracetest.SpanStubs, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	for _, s := range all {
		if match(s) {
			return s
		}
	}
	return tracetest.SpanStub{}
}

// spansIn names the spans of one trace.
func spansIn(all tracetest.SpanStubs, id trace.TraceID) []string {
	var names []string
	for _, s := range all {
		if s.SpanContext.TraceID() == id {
			names = append(names, s.Name)
		}
	}
	return names
}

func spanNames(all tracetest.SpanStubs) []string {
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	return names
}

func hasSpan(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

func hasSpanPrefix(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// TestWithoutTracingTheMessageCarriesNoTrace: tracing off (the default),
// the order's message is the one before tracing, byte for byte: no
// traceparent, so instances of an older version read it.
func TestWithoutTracingTheMessageCarriesNoTrace(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) { c.Queue = "streamgroup"; c.Consumers = 0 })
	voucher := h.openVoucher(5)
	status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(3), nil)
	if status != 200 {
		t.Fatalf("buy: %d %v", status, body)
	}
	msgs, err := h.srv.rdb.XRange(context.Background(), h.queueKey("orders", voucher), "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("the queue: %v %v, want the one order", msgs, err)
	}
	for _, v := range msgs[0].Values {
		if s, _ := v.(string); strings.Contains(s, "00-") {
			t.Fatalf("the message %v carries a trace with tracing off", msgs[0].Values)
		}
	}
	o, err := core.DecodeOrder([]byte(msgs[0].Values[streamgroup.BodyField].(string)))
	if err != nil || o.Trace != "" || idString(o.ID) != body["orderId"] {
		t.Fatalf("the message reads as %+v %v", o, err)
	}
}

// TestTracingIsConfiguredByTheOTELVariables: neither endpoint variable,
// no provider (nothing exported, no connection tried); an endpoint, a
// provider; OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none, none; an
// exporter or protocol not built in is an error at the start, never a
// silent lack of traces.
func TestTracingIsConfiguredByTheOTELVariables(t *testing.T) {
	for _, c := range []struct {
		env      map[string]string
		provider bool
		err      string
	}{
		{env: map[string]string{}},
		{env: map[string]string{"OTEL_TRACES_SAMPLER": "always_on"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, provider: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, provider: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "http/protobuf only"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, err: "http/protobuf only"},
	} {
		tp, err := tracingFromEnv(context.Background(), func(k string) string { return c.env[k] })
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v, want an error naming %s", c.env, err, c.err)
			}
			continue
		}
		if err != nil || (tp != nil) != c.provider {
			t.Errorf("%v: provider %v, %v; want provider=%v", c.env, tp != nil, err, c.provider)
		}
		if tp != nil {
			tp.Shutdown(context.Background())
		}
	}
}

// TestALogLineLeadsToItsTrace: a line logged with a span's context names
// the span's trace and span; one without, nothing.
func TestALogLineLeadsToItsTrace(t *testing.T) {
	var out strings.Builder
	log := slog.New(traceLog{slog.NewJSONHandler(&out, nil)}).With("component", "test")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	log.ErrorContext(ctx, "request failed")
	span.End()
	log.Error("no context")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	sc := span.SpanContext()
	if len(lines) != 2 || !strings.Contains(lines[0], `"trace_id":"`+sc.TraceID().String()+`"`) ||
		!strings.Contains(lines[0], `"span_id":"`+sc.SpanID().String()+`"`) || !strings.Contains(lines[0], `"component":"test"`) {
		t.Fatalf("the line with a span: %v", lines)
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Fatalf("a line without a span names a trace: %s", lines[1])
	}
}

// TestARequestContinuesItsCallersTrace: a request from a trusted proxy
// carrying a sampled traceparent gets its span in the caller's trace, the
// caller's span its parent, named by its route, with the status it
// answered (an error answer's too); a request without one starts a trace
// of its own.
func TestARequestContinuesItsCallersTrace(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	h := startServerOpts(t, "embedded", func(c *Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}, []Option{WithTracerProvider(tp)}, nil)
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	status, _, _ := h.request("GET", "/api/vouchers/999999", "", nil, map[string][]string{"Traceparent": {caller}})
	if status != 404 {
		t.Fatalf("an unknown voucher: %d, want 404", status)
	}
	h.do("GET", "/api/vouchers", "", nil)
	var continued, own tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		switch {
		case s.SpanKind == trace.SpanKindServer && s.Name == "/api/vouchers/:id":
			continued = s
		case s.SpanKind == trace.SpanKindServer && s.Name == "/api/vouchers":
			own = s
		}
	}
	if continued.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || continued.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("the request's span %v, parent %v: not in the caller's trace (all: %v)", continued.SpanContext, continued.Parent, spanNames(spans.GetSpans()))
	}
	statusOK := false
	for _, a := range continued.Attributes {
		if a.Key == "http.response.status_code" && a.Value.AsInt64() == 404 {
			statusOK = true
		}
	}
	if !statusOK {
		t.Fatalf("the span's attributes %v do not say 404", continued.Attributes)
	}
	if !own.SpanContext.IsValid() || own.SpanContext.TraceID() == continued.SpanContext.TraceID() || own.Parent.IsValid() {
		t.Fatalf("a request without a traceparent: %v, parent %v; want a trace of its own", own.SpanContext, own.Parent)
	}
}

// TestARedriveJoinsItsOrdersTrace: an order the database refused is
// dead-lettered; its re-drive's persistence is in the trace of the
// request that reserved it.
func TestARedriveJoinsItsOrdersTrace(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	h := startServerOpts(t, "embedded", func(c *Config) { c.Queue = "streamgroup" }, []Option{WithTracerProvider(tp)}, nil)
	voucher := h.openVoucher(3)
	buyRefused(t, h, voucher, 5)
	waitForLetters(t, h, "voucher="+idString(voucher), 1)
	setStockColumn(t, h, voucher, 3)
	if status, out := h.do("POST", "/api/admin/deadletters/redrive", h.cfg.AdminToken, map[string]any{"voucher": idString(voucher)}); status != 200 || out["redriven"] != float64(1) {
		t.Fatalf("re-drive: %d %v", status, out)
	}
	request := findSpan(spans.GetSpans(), func(s tracetest.SpanStub) bool {
		return s.SpanKind == trace.SpanKindServer && s.Name == "/api/vouchers/:id/seckill"
	})
	waitForSpanIn(t, spans, request.SpanContext.TraceID(), "redrive orders")
}

// TestOneTraceWhenOneInstanceAnswersAndAnotherPersists: an API-only
// instance answers the shopper, another instance's consumer persists the
// order (each with its own tracer provider, as two processes would): the
// consumer's persistence is a child of the answering instance's request
// span, in its trace, on a Redis queue, a list and an outside broker.
func TestOneTraceWhenOneInstanceAnswersAndAnotherPersists(t *testing.T) {
	for _, queue := range []string{"streamgroup", "list", "nats"} {
		t.Run(queue, func(t *testing.T) {
			front, back := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
			frontTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(front))
			backTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(back))
			t.Cleanup(func() { frontTP.Shutdown(context.Background()); backTP.Shutdown(context.Background()) })
			h := startServerOpts(t, "real", func(c *Config) { c.Queue = queue; c.Consumers = 0 }, []Option{WithTracerProvider(frontTP)}, nil)
			consumerCfg := h.cfg
			consumerCfg.Consumers = 1
			startWithOpts(t, consumerCfg, []Option{WithTracerProvider(backTP)})
			voucher := h.openVoucher(3)
			if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(3), nil); status != 200 {
				t.Fatalf("buy: %d %v", status, body)
			}
			if n := h.waitForRows(voucher, 1, 30*time.Second); n != 1 {
				t.Fatalf("%d rows, want the order persisted by the other instance", n)
			}
			request := findSpan(front.GetSpans(), func(s tracetest.SpanStub) bool {
				return s.SpanKind == trace.SpanKindServer && s.Name == "/api/vouchers/:id/seckill"
			})
			if hasSpan(spanNames(front.GetSpans()), "persist orders") {
				t.Fatal("the API-only instance persisted the order")
			}
			waitForSpanIn(t, back, request.SpanContext.TraceID(), "persist orders")
			persist := findSpan(back.GetSpans(), func(s tracetest.SpanStub) bool { return s.Name == "persist orders" })
			if persist.Parent.SpanID() != request.SpanContext.SpanID() {
				t.Fatalf("the persistence's parent %v is not the request %v", persist.Parent, request.SpanContext)
			}
		})
	}
}

// TestOnlyATrustedProxyForcesSampling: under a 1 % ratio sampler (the
// compose file's), the review sent 200 requests with a traceparent
// flagged sampled and got 400 spans. From an address that is not a
// trusted proxy the flag is not believed: those requests are sampled by
// the ratio, as if they carried none (here none of 200 at a ratio of 0);
// from a trusted proxy they continue the caller's trace.
func TestOnlyATrustedProxyForcesSampling(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))))
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		h := startServerOpts(t, "embedded", func(c *Config) {
			if trusted {
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			}
		}, []Option{WithTracerProvider(tp)}, nil)
		for i := range 200 {
			tp := fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
			h.request("GET", "/api/vouchers", "", nil, map[string][]string{"Traceparent": {tp}})
		}
		requests := 0
		for _, s := range spans.GetSpans() {
			if s.SpanKind == trace.SpanKindServer {
				requests++
			}
		}
		if want := map[bool]int{false: 0, true: 200}[trusted]; requests != want {
			t.Fatalf("trusted proxy %v: %d request spans of 200 flagged sampled, want %d", trusted, requests, want)
		}
	}
}

// TestASpansPathIsItsOwnRequests: the review found 2 of 204 spans naming
// another request's path (/api/admin/vou on /api/auth/code): the span kept
// a string in fasthttp's buffer, which the connection's next request
// reuses before the span is exported. Concurrent requests on different
// paths over kept-alive connections: every span's url.path is its route's.
func TestASpansPathIsItsOwnRequests(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans, sdktrace.WithBatchTimeout(time.Hour), sdktrace.WithMaxExportBatchSize(100000), sdktrace.WithMaxQueueSize(100000)))
	h := startServerOpts(t, "embedded", nil, []Option{WithTracerProvider(tp)}, nil)
	paths := []string{"/api/vouchers/1", "/api/vouchers/22/order", "/api/orders/333333", "/api/admin/deadletters?x=1", "/api/vouchers"}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 60 {
				h.request("GET", paths[(w+i)%len(paths)], "", nil, nil)
			}
		})
	}
	wg.Wait()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	checked := 0
	for _, s := range spans.GetSpans() {
		var path, route string
		for _, a := range s.Attributes {
			switch a.Key {
			case "url.path":
				path = a.Value.AsString()
			case "http.route":
				route = a.Value.AsString()
			}
		}
		if route == "" {
			continue
		}
		checked++
		if !routeMatches(route, path) {
			t.Errorf("a span of route %s has url.path %q", route, path)
		}
	}
	if checked < 400 {
		t.Fatalf("%d request spans checked, want the 480 sent", checked)
	}
}

// routeMatches reports whether path is one of route's (":x" any segment).
func routeMatches(route, path string) bool {
	r, p := strings.Split(route, "/"), strings.Split(path, "/")
	if len(r) != len(p) {
		return false
	}
	for i := range r {
		if !strings.HasPrefix(r[i], ":") && r[i] != p[i] {
			return false
		}
	}
	return true
}
