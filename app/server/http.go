package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/steer"
	"github.com/seckill-lab/seckill/docs"
)

// api is the HTTP server: what every request goes through (its span,
// its deadline, the caller's address and limits, the shopper's token and
// the operator's gate, errors made answers) and the route groups, each
// with what its handlers need: the shoppers' (vouchers, rooms, seckill,
// orders), login, payments and the operator's. Built by wire.
type api struct {
	log *slog.Logger
	// tracing gives each request its span, when the server traces
	// (tracing.go).
	tracing tracing
	tokens  *Tokens
	metrics *metrics
	// metricsElsewhere: /metrics has a listener of its own
	// (SECKILL_METRICS_ADDR), not the API's. metricsNeedToken: on the
	// API's listener it needs the admin token (real servers: it shows the
	// login figures, queue depths and dead letters the dashboard keeps to
	// the operator).
	metricsElsewhere, metricsNeedToken bool
	adminGate                          *adminGate
	limits                             *rateLimits
	clients                            *clientAddresses
	// ready reports whether the dependencies answer.
	ready func(ctx context.Context) error
	// requestTimeout is every request's deadline (SECKILL_REQUEST_TIMEOUT).
	requestTimeout time.Duration
	// The route groups.
	shopper  *shopperRoutes
	login    *loginRoutes
	payments *paymentRoutes
	operator *operatorRoutes
}

const (
	maxBodyBytes   = 16 << 10
	maxHeaderBytes = 8 << 10
)

func (a *api) newServer() *fiber.App {
	app := fiber.New(fiber.Config{
		AppName:               "seckill",
		DisableStartupMessage: true,
		BodyLimit:             maxBodyBytes,
		ReadBufferSize:        maxHeaderBytes,
		ReadTimeout:           10 * time.Second,
		WriteTimeout:          10 * time.Second,
		IdleTimeout:           60 * time.Second,
		ErrorHandler:          a.handleError,
		JSONEncoder:           json.Marshal,
		JSONDecoder:           json.Unmarshal,
		// Always on: without it Fiber trusts every peer's X-Forwarded-*
		// headers. The client address itself is clientAddresses'.
		EnableTrustedProxyCheck: true,
		TrustedProxies:          a.clients.trustedList(),
	})
	a.useMiddleware(app)
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Get("/readyz", a.readyz)
	switch {
	case a.metricsElsewhere:
	case a.metricsNeedToken:
		app.Get("/metrics", a.adminGate.require, adaptor.HTTPHandler(a.metrics.handler()))
	default:
		app.Get("/metrics", adaptor.HTTPHandler(a.metrics.handler()))
	}
	app.Get("/openapi.yaml", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, "application/yaml")
		return c.Send(docs.OpenAPI)
	})

	a.login.mount(app, a)
	a.operator.mount(app, a)
	app.Get("/", pageHeaders, pageFile("index.html"))
	app.Get("/assets/:file", pageHeaders, asset)
	app.Get("/dashboard", pageHeaders, pageFile("dashboard.html"))
	a.shopper.mount(app, a)
	a.payments.mount(app, a)
	return app
}

// useMiddleware puts what every request goes through before its route.
func (a *api) useMiddleware(app *fiber.App) {
	// First: the request's span covers the rest, and its context is the
	// one the deadline below wraps.
	for _, h := range a.tracing.middleware(a.clients) {
		app.Use(h)
	}
	app.Use(requestid.New())
	app.Use(perAddressRequests(a.clients))
	app.Use(securityHeaders)
	app.Use(a.deadline)
	app.Use(recover.New(recover.Config{
		EnableStackTrace: true,
		StackTraceHandler: func(c *fiber.Ctx, e any) {
			a.log.ErrorContext(c.UserContext(), "panic in handler", "request_id", requestID(c), "path", c.Path(),
				"panic", fmt.Sprint(e), "stack", string(debug.Stack()))
		},
	}))
}

func requestID(c *fiber.Ctx) string {
	id, _ := c.Locals("requestid").(string)
	return id
}

// deadline gives the request its deadline: every Redis and MySQL call it
// makes carries it (go-redis with ContextTimeoutEnabled, database/sql), so
// a dependency that does not answer costs the shopper requestTimeout and a
// 503, not a hung connection and a goroutine.
func (a *api) deadline(c *fiber.Ctx) error {
	if a.requestTimeout <= 0 {
		return c.Next()
	}
	// From the time fasthttp read the request at (no second clock read),
	// armed only if something waits on it (newRequestDeadline).
	start := c.Context().Time()
	if start.IsZero() {
		start = time.Now()
	}
	ctx := newRequestDeadline(c.UserContext(), start.Add(a.requestTimeout))
	defer ctx.cancel()
	c.SetUserContext(ctx)
	err := c.Next()
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && core.CodeOf(err) == core.CodeInternal {
		// A dependency's error past the deadline that nothing classified.
		return core.Wrap("request deadline", core.CodeUnavailable, err)
	}
	return err
}

// statusOf maps an error code to its HTTP status.
func statusOf(code core.Code) int {
	switch code {
	case core.CodeBadRequest, core.CodePhoneNotAllowed:
		return fiber.StatusBadRequest
	case core.CodeUnauthorized, core.CodeBadCode, core.CodeBadSignature:
		return fiber.StatusUnauthorized
	case core.CodeNotStarted, core.CodeEnded, core.CodeNotAdmitted, core.CodePuzzleRequired, core.CodePaused:
		return fiber.StatusForbidden
	case core.CodeVoucherNotFound, core.CodeOrderNotFound, core.CodeDeadLetterNotFound:
		return fiber.StatusNotFound
	case core.CodeSoldOut, core.CodeAlreadyPurchased, core.CodeNotReconcilable, core.CodeNotCancellable,
		core.CodeNotPayable, core.CodePaymentsDisabled, core.CodeNotSupported, core.CodeAlreadyBegun, core.CodeNotEnoughStock,
		core.CodeNotRefundable:
		return fiber.StatusConflict
	case core.CodeRateLimited:
		return fiber.StatusTooManyRequests
	case core.CodeBusy, core.CodeUnconfirmed, core.CodeNotReady, core.CodeUnavailable:
		return fiber.StatusServiceUnavailable
	}
	return fiber.StatusInternalServerError
}

// Error codes of requests that never reach a handler (Fiber's own errors).
const (
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeBodyTooLarge     = "body_too_large"
	codeHeadersTooLarge  = "headers_too_large"
)

// errorCodes is every code an error body can carry.
func errorCodes() []string {
	out := []string{codeNotFound, codeMethodNotAllowed, codeBodyTooLarge, codeHeadersTooLarge, codeUnsupportedMediaType}
	for _, c := range core.Codes {
		out = append(out, string(c))
	}
	return out
}

// handleError is the one place errors become responses. Causes are logged,
// never sent: the client sees the code and a fixed message.
func (a *api) handleError(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) {
		// Errors raised by Fiber itself: unknown route, wrong method, body
		// too large, malformed request.
		code := string(core.CodeBadRequest)
		switch fe.Code {
		case fiber.StatusNotFound:
			code = codeNotFound
		case fiber.StatusMethodNotAllowed:
			code = codeMethodNotAllowed
		case fiber.StatusRequestEntityTooLarge:
			code = codeBodyTooLarge
		case fiber.StatusRequestHeaderFieldsTooLarge:
			code = codeHeadersTooLarge
		}
		status := fe.Code
		if status >= 500 {
			status = fiber.StatusBadRequest
		}
		return writeError(c, status, code, fe.Message)
	}
	code := core.CodeOf(err)
	status := statusOf(code)
	if steer.IsConflict(err) {
		status = fiber.StatusConflict // the voucher's state refused an operator's action
	}
	if status >= 500 {
		a.log.ErrorContext(c.UserContext(), "request failed", "request_id", requestID(c), "method", c.Method(),
			"path", c.Path(), "user", shopperID(c), "code", code, "err", err)
	}
	if code == core.CodeBusy || code == core.CodeUnavailable {
		c.Set(fiber.HeaderRetryAfter, "1")
	}
	var limited *core.RateLimitedError
	if errors.As(err, &limited) {
		// Whole seconds (RFC 9110), rounded up: never earlier than admitted.
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(math.Ceil(max(limited.RetryAfter, time.Second).Seconds()))))
	}
	if orderID, ok := core.HeldOrderOf(err); ok {
		// Already purchased or unconfirmed: the shopper's order, so a lost
		// first answer is never the last word.
		return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"code": string(code), "message": core.MessageOf(err),
			"orderId": strconv.FormatInt(orderID, 10)}})
	}
	return writeError(c, status, string(code), clientMessage(err))
}

func writeError(c *fiber.Ctx, status int, code, message string) error {
	return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"code": code, "message": message}})
}

func badRequest(format string, args ...any) error {
	return core.E(core.CodeBadRequest, fmt.Sprintf(format, args...))
}

// pathID parses a positive int64 path parameter.
func pathID(c *fiber.Ctx, name string) (int64, error) {
	id, err := strconv.ParseInt(c.Params(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("%s must be a positive integer", name)
	}
	return id, nil
}

func (a *api) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	if err := a.ready(ctx); err != nil {
		a.log.Warn("not ready", "err", err)
		why := "a dependency does not answer"
		if e, ok := errors.AsType[*core.Error](err); ok && e.Code == core.CodeBusy {
			why = e.Message // the queue cannot take orders, and says why
		}
		return writeError(c, fiber.StatusServiceUnavailable, string(core.CodeNotReady), why)
	}
	return c.JSON(fiber.Map{"status": "ready"})
}
