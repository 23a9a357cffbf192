package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/extra/bunotel"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/seckill-lab/seckill/adapters/oteltrace"
)

// Tracing (docs/production.md, "Traces"): with OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, spans go over OTLP
// http/protobuf, the SDK and the exporter reading every other OTEL_*
// variable themselves (sampler, headers, timeout, resource); with neither,
// or OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none, there is no
// provider and nothing below is mounted: no middleware, no hook, no field
// in the order's message.

// OTELVariables are the OpenTelemetry specification's variables that
// configure the server's traces, read by tracingFromEnv or by the SDK and
// its OTLP exporter themselves (a deployment file setting another OTEL_
// name has misspelt one).
var OTELVariables = []string{
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
	"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
}

// tracerName is the instrumentation scope of the spans this server starts
// itself (the libraries' own spans carry theirs).
const tracerName = "github.com/seckill-lab/seckill"

// Option changes how New builds a server beyond its Config.
type Option func(*Server)

// WithTracerProvider traces through tp instead of the OTEL_* environment
// (a program embedding the server with a provider of its own, or a test's
// in-memory one). The server does not shut tp down.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Server) {
		s.tracing = newTracing(tp, noShutdown)
		s.log = slog.New(traceLog{s.log.Handler()})
	}
}

// tracingFromEnv is the provider the OTEL_* environment asks for, nil when
// it asks for none; an exporter it names that is not built in is an error
// (a start that would trace nothing while the operator thinks it does).
func tracingFromEnv(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	if disabled, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); disabled {
		return nil, nil
	}
	switch e := getenv("OTEL_TRACES_EXPORTER"); e {
	case "", "otlp":
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: this server exports otlp (or none)", e)
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if protocol != "" && protocol != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: this server exports http/protobuf only", protocol)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", "seckill")), resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// tracing is the server's tracing: the provider, the requests' spans, and
// the W3C propagation of trace context into requests. The sale's spans
// are adapters/oteltrace's wrappers, over scriptTracer. A server that
// traces nothing has noTracing: a provider that records nothing, and on
// false, so that no request pays for a middleware and no client library
// for hooks.
type tracing struct {
	on         bool
	provider   trace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	// shutdown flushes and stops a provider the server made (noShutdown
	// for one it was given).
	shutdown func(context.Context) error
}

func newTracing(tp trace.TracerProvider, shutdown func(context.Context) error) tracing {
	return tracing{on: true, provider: tp, tracer: tp.Tracer(tracerName), shutdown: shutdown,
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
}

// noTracing is the tracing of a server that traces nothing.
func noTracing() tracing {
	tp := noop.NewTracerProvider()
	return tracing{provider: tp, tracer: tp.Tracer(tracerName), propagator: propagation.TraceContext{}, shutdown: noShutdown}
}

func noShutdown(context.Context) error { return nil }

// scriptTracer is the tracer of the reservation's batched script calls
// and of the sale's spans (adapters/oteltrace): one that records nothing
// when the server traces nothing.
func (t tracing) scriptTracer() trace.Tracer { return t.tracer }

// middleware is what each request goes through for its span: nothing when
// the server traces nothing.
func (t tracing) middleware(clients *clientAddresses) []fiber.Handler {
	if !t.on {
		return nil
	}
	return []fiber.Handler{t.requestSpan(clients)}
}

// requestSpan is the HTTP request's span, continuing a caller's W3C trace
// context. Not Fiber's otelfiber: measured at 1 % sampling it left the
// endpoint 0.64 to 0.69 of its rate without tracing (every request's
// headers copied into a net/http Header, four metrics recorded with
// attribute sets built whether or not a meter is set); here a request
// that is not sampled costs one header read and the SDK's sampling
// decision, and the span's attributes are set only on a recorded span.
//
// A caller's trace context is continued only from a trusted proxy
// (SECKILL_TRUSTED_PROXIES): anyone else's traceparent flagged sampled
// would force a recorded trace of every request it sends (the review's
// 200 requests made 400 spans under a 1 % sampler), so the ratio samples
// those as requests of their own.
func (t tracing) requestSpan(clients *clientAddresses) fiber.Handler {
	return func(c *fiber.Ctx) error {
		saved := c.UserContext()
		ctx := saved
		if peer, _ := netip.AddrFromSlice(c.Context().RemoteIP()); clients.isTrusted(peer) {
			ctx = propagation.TraceContext{}.Extract(saved, fasthttpCarrier{&c.Request().Header})
		}
		ctx, span := t.tracer.Start(ctx, "request", trace.WithSpanKind(trace.SpanKindServer)) // named by its route once recorded
		defer span.End()
		c.SetUserContext(ctx)
		err := c.Next()
		if !span.IsRecording() {
			return err
		}
		if err != nil {
			// Answered here, as Fiber would after: the span gets the
			// status the shopper gets.
			span.RecordError(err)
			if herr := c.App().Config().ErrorHandler(c, err); herr != nil {
				return herr
			}
		}
		status := c.Response().StatusCode()
		route := c.Route().Path
		span.SetName(strings.Clone(route))
		// Copies: Fiber's strings point into fasthttp's buffers, which the
		// next request on the connection reuses, and the span is exported
		// later (the review read /api/admin/vou on /api/auth/code).
		span.SetAttributes(attribute.String("http.request.method", strings.Clone(c.Method())), attribute.String("http.route", strings.Clone(route)),
			attribute.String("url.path", strings.Clone(c.Path())), attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
		c.SetUserContext(saved)
		return nil
	}
}

// fasthttpCarrier reads a request's headers for the propagator without
// copying them.
type fasthttpCarrier struct{ h *fasthttp.RequestHeader }

func (f fasthttpCarrier) Get(key string) string { return string(f.h.Peek(key)) }
func (f fasthttpCarrier) Set(string, string)    {}
func (f fasthttpCarrier) Keys() []string        { return nil }

// instrumentRedis traces each Redis command and script call (go-redis's
// redisotel) made within a trace; the command lines stay out of the
// spans (they carry shoppers' ids and order bodies, and formatting them
// costs every call, sampled or not).
func (t tracing) instrumentRedis(rdb redis.UniversalClient) error {
	if !t.on {
		return nil
	}
	return redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(childOnly{t.provider}), redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false))
}

// sqlHooks trace each query (bun's bunotel) made within a trace; none
// when the server traces nothing.
func (t tracing) sqlHooks() []bun.QueryHook {
	if !t.on {
		return nil
	}
	return []bun.QueryHook{bunotel.NewQueryHook(bunotel.WithTracerProvider(childOnly{t.provider}), bunotel.WithDBName("seckill"))}
}

// libraryProvider is the provider a client library's instrumentation
// records with (childOnly): one that records nothing when the server
// traces nothing.
func (t tracing) libraryProvider() trace.TracerProvider {
	if !t.on {
		return t.provider
	}
	return childOnly{t.provider}
}

// childOnly is a provider whose spans exist only inside a sampled trace:
// the libraries' instrumentation would otherwise make a trace of its own
// of every background command (a consumer's blocking read, a duty's
// tick), thousands a minute that lead to no order; and the children of a
// request not sampled would be made, to be dropped, at a cost on every
// command of the 99 % a 1 % sampler leaves out (the standard samplers
// decide a child as its trace: parent-based, or by the trace id).
type childOnly struct{ trace.TracerProvider }

func (c childOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childOnlyTracer{Tracer: c.TracerProvider.Tracer(name, opts...)}
}

type childOnlyTracer struct{ trace.Tracer }

func (c childOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ctx, trace.SpanFromContext(ctx) // the context's own: not recorded
	}
	return c.Tracer.Start(ctx, name, opts...)
}

// spans is the sale's tracing (adapters/oteltrace): its wrappers of the
// parts core calls, added here at wiring, and the trace each order
// carries. Over a tracer that records nothing when the server traces
// nothing: no order carries a trace then, and no wrapper starts a span.
func (s *Server) spans() *oteltrace.Tracer { return oteltrace.New(s.tracing.scriptTracer()) }

// close flushes the spans not yet exported, within a few seconds.
func (t tracing) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("tracing: %w", err)
	}
	return nil
}

// openTracing sets the server's tracing up from the environment, unless an
// Option gave it a provider.
func (s *Server) openTracing(ctx context.Context) error {
	if s.tracing.on {
		return nil // given by WithTracerProvider
	}
	tp, err := tracingFromEnv(ctx, os.Getenv)
	if err != nil || tp == nil {
		return err
	}
	s.tracing = newTracing(tp, tp.Shutdown)
	s.log = slog.New(traceLog{s.log.Handler()})
	s.log.Info("tracing: exporting spans over OTLP http/protobuf",
		"endpoint", strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")+" "+os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")))
	return nil
}

// traceLog adds the trace_id and span_id of the span a log call's context
// carries (slog's *Context methods), so a line leads to its trace; a line
// without one is passed on as it is.
type traceLog struct{ slog.Handler }

func (h traceLog) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceLog{h.Handler.WithAttrs(attrs)}
}

func (h traceLog) WithGroup(name string) slog.Handler { return traceLog{h.Handler.WithGroup(name)} }
