package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"

	"github.com/seckill-lab/seckill/adapters/logincode"
	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/paysandbox"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
	"github.com/seckill-lab/seckill/core/recovery"
	"github.com/seckill-lab/seckill/core/room"
	"github.com/seckill-lab/seckill/docs"
)

// api holds what the handlers need; it is built by wire.
type api struct {
	log *slog.Logger
	// tracing, when set, gives each request its span (tracing.go).
	tracing *tracing
	// deadLetters is the operator's register of dead letters; desk
	// re-drives and discards them.
	deadLetters deadletters.Register
	desk        *deadletters.Desk
	seckill     *core.Seckill
	lifecycle   *core.Lifecycle
	payments    *core.Payments
	// paymentsDB finds recorded payments (the sandbox's page); sandbox is
	// the provider when it is the built-in sandbox (nil otherwise).
	paymentsDB interface {
		FindPayment(ctx context.Context, id string) (core.Payment, error)
	}
	sandbox *paysandbox.Sandbox
	// orderCounts counts orders by lifecycle state (the dashboard).
	orderCounts interface {
		OrderCounts(ctx context.Context) (map[string]int64, error)
	}
	// shoppers reads a shopper's phone and orders (/api/me, /api/orders).
	shoppers interface {
		UserPhone(ctx context.Context, userID int64) (string, error)
		OrdersOfUser(ctx context.Context, userID int64, limit int) ([]core.Order, error)
	}
	catalog *core.Catalog
	// rooms are the vouchers' waiting rooms; draws each room's published
	// draw, encoded (int64 -> []byte).
	rooms *room.Rooms
	// gate is a purchase's one way in: the room's pass checked where the
	// voucher has one.
	gate  *room.Gate
	draws sync.Map
	users core.UserRepository
	// userAdmin reports what the admin decides on.
	userAdmin interface {
		PhoneCollisions(context.Context) ([]core.PhoneCollision, error)
	}
	// orders finds an order in the database, whoever's it is.
	orders interface {
		FindOrder(ctx context.Context, orderID int64) (core.Order, error)
	}
	// voucherAdmin lists the vouchers for the operator.
	voucherAdmin interface {
		VoucherSummaries(ctx context.Context, before int64, limit int) ([]core.VoucherSummary, error)
	}
	codes *logincode.Codes
	// sender delivers login codes (nil: none; then only dev codes).
	sender      core.CodeSender
	phoneRegion string
	// phoneRegions are the regions whose mobile numbers get codes.
	phoneRegions []string
	tokens       *Tokens
	metrics      *metrics
	devCodes     bool
	// metricsElsewhere: /metrics has a listener of its own
	// (SECKILL_METRICS_ADDR), not the API's. metricsNeedToken: on the
	// API's listener it needs the admin token (real servers: it shows the
	// login figures, queue depths and dead letters the dashboard keeps to
	// the operator).
	metricsElsewhere, metricsNeedToken bool
	// warnings are shown on the dashboard.
	warnings  []string
	adminGate *adminGate
	limits    *rateLimits
	clients   *clientAddresses
	// seckillRate is the per-shopper limit; codeRate and loginRate the
	// per-client-address ones.
	seckillRate, codeRate, loginRate redis_rate.Limit
	// missRate limits the answers voucher_not_found per client address.
	missRate redis_rate.Limit
	// ready reports whether the dependencies answer.
	ready func(ctx context.Context) error
	// recovery rebuilds Redis's state of a voucher (nil under sync);
	// ledger is the database's side, queueStats the queue's, if it tells.
	recovery   *recovery.Guard
	ledger     recovery.Ledger
	queueStats core.StatsReporter
	// relay is an outside broker's relay (nil for the other backends).
	relay core.RelayReporter
	// guarantees are the backend's declared ones (nil without a queue);
	// dashboard makes what /dashboard shows.
	guarantees *core.Guarantees
	dashboard  *dashboard
	backend    string
	// requestTimeout is every request's deadline (SECKILL_REQUEST_TIMEOUT).
	requestTimeout time.Duration
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

	app.Post("/api/auth/code", requireJSON, a.limits.limit("code", a.codeRate, a.clients.limitKey), a.sendCode)
	app.Post("/api/auth/login", requireJSON, a.limits.limit("login", a.loginRate, a.clients.limitKey), a.login)
	app.Post("/api/admin/vouchers", a.adminGate.require, a.createVoucher)
	app.Get("/api/admin/vouchers", a.adminGate.require, a.adminVouchers)
	app.Get("/api/admin/vouchers/:id/audit", a.adminGate.require, a.auditVoucher)
	app.Get("/api/admin/users/phone-collisions", a.adminGate.require, a.phoneCollisions)
	app.Post("/api/admin/vouchers/:id/reconcile", a.adminGate.require, a.reconcileVoucher)
	app.Get("/api/admin/deadletters", a.adminGate.require, a.listDeadLetters)
	app.Get("/api/admin/deadletters/:id", a.adminGate.require, a.showDeadLetter)
	app.Post("/api/admin/deadletters/redrive", a.adminGate.require, a.redriveDeadLetters)
	app.Post("/api/admin/deadletters/discard", a.adminGate.require, a.discardDeadLetters)
	app.Get("/", pageHeaders, pageFile("index.html"))
	app.Get("/assets/:file", pageHeaders, asset)
	app.Get("/dashboard", pageHeaders, pageFile("dashboard.html"))
	// The page is public; its figures (live sales, dead letters, order
	// volume) are the operator's.
	app.Get("/api/dashboard", a.adminGate.require, a.dashboardData)
	app.Get("/api/dashboard/charts/:name", a.adminGate.require, pageHeaders, a.dashboardChart)
	app.Get("/api/vouchers", a.listVouchers)
	misses := a.limits.limitMisses(a.missRate, a.clients.limitKey)
	app.Get("/api/vouchers/:id", misses, a.getVoucher)
	app.Post("/api/vouchers/:id/room", misses, a.tokens.requireShopper, a.joinRoom)
	app.Get("/api/vouchers/:id/room", misses, a.tokens.requireShopper, a.roomStatus)
	app.Get("/api/vouchers/:id/room/draw", misses, a.roomDraw)
	app.Post("/api/vouchers/:id/seckill", misses, a.tokens.requireShopper, a.limits.limit("seckill", a.seckillRate, byShopper), a.buy)
	app.Get("/api/vouchers/:id/order", a.tokens.requireShopper, a.orderOfVoucher)
	app.Get("/api/me", a.tokens.requireShopper, a.me)
	app.Get("/api/orders", a.tokens.requireShopper, a.myOrders)
	app.Get("/api/orders/:orderId", a.tokens.requireShopper, a.getOrder)
	app.Post("/api/orders/:orderId/cancel", a.tokens.requireShopper, a.cancelOrder)
	app.Post("/api/orders/:orderId/pay", a.tokens.requireShopper, a.payOrder)
	app.Post("/api/payments/:provider/notify", a.paymentNotify)
	if a.sandbox != nil {
		app.Get(paysandbox.PagePath+":paymentId", pageHeaders, pageFile("pay.html"))
		app.Get("/api/payments/sandbox/:paymentId", a.sandboxPayment)
		app.Post("/api/payments/sandbox/:paymentId/complete", requireJSON, a.sandboxComplete)
	}
	return app
}

// useMiddleware puts what every request goes through before its route.
func (a *api) useMiddleware(app *fiber.App) {
	if a.tracing != nil {
		// First: the request's span covers the rest, and its context is
		// the one the deadline below wraps.
		app.Use(a.tracing.middleware(a.clients))
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
	case core.CodeNotStarted, core.CodeEnded, core.CodeNotAdmitted, core.CodePuzzleRequired:
		return fiber.StatusForbidden
	case core.CodeVoucherNotFound, core.CodeOrderNotFound, core.CodeDeadLetterNotFound:
		return fiber.StatusNotFound
	case core.CodeSoldOut, core.CodeAlreadyPurchased, core.CodeNotReconcilable, core.CodeNotCancellable,
		core.CodeNotPayable, core.CodePaymentsDisabled:
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

func (a *api) sendCode(c *fiber.Ctx) error {
	var req struct {
		Phone string `json:"phone"`
	}
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	phone, err := core.NormalizePhone(req.Phone, a.phoneRegion)
	if err != nil {
		return err
	}
	if err := core.MayReceiveCodes(phone, a.phoneRegions); err != nil {
		a.metrics.codesSent.WithLabelValues("not_allowed").Inc()
		return err
	}
	if a.sender == nil && !a.devCodes {
		return core.E(core.CodeUnavailable, "login codes cannot be sent: the server has no code sender configured")
	}
	ctx := c.UserContext()
	code, err := a.codes.Issue(ctx, phone, a.clients.limitKey(c))
	if err != nil {
		return core.Wrap("send code", core.CodeUnavailable, err)
	}
	if a.sender != nil {
		if err := a.sender.Send(ctx, code); err != nil {
			a.metrics.codesSent.WithLabelValues("failed").Inc()
			a.log.Warn("login code not delivered: withdrawn, the shopper is told to retry", "request_id", requestID(c), "err", err)
			// Withdrawn even past the request's deadline: a code that never
			// reached the phone must not hold off the shopper's next try.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			if werr := a.codes.Withdraw(wctx, code); werr != nil {
				a.log.Warn("undelivered login code not withdrawn", "err", werr)
			}
			return core.Wrap("send code", core.CodeBusy, err)
		}
		a.metrics.codesSent.WithLabelValues("sent").Inc()
	}
	resp := fiber.Map{"sent": true, "challenge": code.Challenge, "codeDigits": len(code.Code)}
	if a.devCodes {
		a.metrics.codesSent.WithLabelValues("dev").Inc()
		resp["code"] = code.Code
	}
	return c.JSON(resp)
}

// phoneCollisions lists the phones several users share once normalised
// (accounts made before numbers were normalised): each logs in as the
// oldest of its users.
func (a *api) phoneCollisions(c *fiber.Ctx) error {
	list, err := a.userAdmin.PhoneCollisions(c.UserContext())
	if err != nil {
		return core.Wrap("phone collisions", core.CodeUnavailable, err)
	}
	if list == nil {
		list = []core.PhoneCollision{}
	}
	return c.JSON(fiber.Map{"collisions": list})
}

// adminVoucherPage bounds one page of the operator's voucher list.
const adminVoucherPage = 100

// adminVouchers lists every voucher, newest first, ended sales included,
// a page at a time (?limit=, ?before= the last id of the page before):
// its state on the server's clock, the database's stock, and its orders
// by state.
func (a *api) adminVouchers(c *fiber.Ctx) error {
	limit, before := 50, int64(0)
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > adminVoucherPage {
			return core.E(core.CodeBadRequest, fmt.Sprintf("limit: want 1 to %d", adminVoucherPage))
		}
		limit = n
	}
	if v := c.Query("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return core.E(core.CodeBadRequest, "before: want the id of the last voucher of the page before")
		}
		before = n
	}
	list, err := a.voucherAdmin.VoucherSummaries(c.UserContext(), before, limit)
	if err != nil {
		return core.Wrap("list vouchers", core.CodeUnavailable, err)
	}
	now := time.Now()
	out := make([]fiber.Map, len(list))
	for i, v := range list {
		state := "on_sale"
		switch {
		case now.Before(v.BeginAt):
			state = "upcoming"
		case !now.Before(v.EndAt):
			state = "ended"
		}
		out[i] = fiber.Map{"id": v.ID, "title": v.Title, "payValue": v.PayValue, "actualValue": v.ActualValue,
			"databaseStock": v.Stock, "beginTime": v.BeginAt.UTC(), "endTime": v.EndAt.UTC(), "state": state,
			"orders": fiber.Map{"unpaid": v.Unpaid, "paid": v.Paid, "cancelled": v.Cancelled, "refunded": v.Refunded}}
	}
	var next any
	if len(list) == limit {
		next = list[len(list)-1].ID
	}
	return c.JSON(fiber.Map{"vouchers": out, "next": next})
}

// loginVerdicts are the metric label and the answer of each verdict.
var loginVerdicts = map[logincode.Verdict]struct{ label, message string }{
	logincode.Accepted: {"ok", ""},
	logincode.Wrong:    {"wrong", "wrong code"},
	logincode.Burned:   {"burned", "wrong code, and that was the last try: ask for a new code"},
	logincode.NoCode:   {"no_code", "no code is waiting under this challenge (expired, used or burned): ask for a new one"},
}

func (a *api) login(c *fiber.Ctx) error {
	var req struct {
		Phone     string `json:"phone"`
		Code      string `json:"code"`
		Challenge string `json:"challenge"`
	}
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	phone, err := core.NormalizePhone(req.Phone, a.phoneRegion)
	if err != nil {
		return err
	}
	if req.Code == "" {
		return badRequest("code is required")
	}
	if req.Challenge == "" {
		return badRequest("challenge is required: the one the code request answered with")
	}
	verdict, err := a.codes.Verify(c.UserContext(), phone, req.Challenge, req.Code)
	if err != nil {
		return core.Wrap("login", core.CodeUnavailable, err)
	}
	v := loginVerdicts[verdict]
	a.metrics.logins.WithLabelValues(v.label).Inc()
	if verdict != logincode.Accepted {
		return core.E(core.CodeBadCode, v.message)
	}
	userID, err := a.users.UserIDByPhone(c.UserContext(), phone)
	if err != nil {
		return core.Wrap("login: user", core.CodeUnavailable, err)
	}
	token, err := a.tokens.Issue(userID, time.Now())
	if err != nil {
		return core.Wrap("login: token", core.CodeInternal, err)
	}
	return c.JSON(fiber.Map{"token": token, "userId": userID})
}

type voucherJSON struct {
	ID          int64     `json:"id"`
	Title       string    `json:"title"`
	PayValue    int64     `json:"payValue"`
	ActualValue int64     `json:"actualValue"`
	Stock       int64     `json:"stock"`
	BeginTime   time.Time `json:"beginTime"`
	EndTime     time.Time `json:"endTime"`
	// Buckets is shown only for a voucher split over several (a hot one).
	Buckets int `json:"buckets,omitempty"`
	// Room is shown for a voucher sold through a waiting room, with
	// RoomCommitment (the draw's seed's SHA-256) from its creation on.
	Room           *roomJSON `json:"room,omitempty"`
	RoomCommitment string    `json:"roomCommitment,omitempty"`
}

func toVoucherJSON(v core.Voucher) voucherJSON {
	out := voucherJSON{ID: v.ID, Title: v.Title, PayValue: v.PayValue, ActualValue: v.ActualValue,
		Stock: v.Stock, BeginTime: v.BeginAt.UTC(), EndTime: v.EndAt.UTC()}
	if v.Buckets > 1 {
		out.Buckets = v.Buckets
	}
	showRoom(&out, v)
	return out
}

func (a *api) createVoucher(c *fiber.Ctx) error {
	var req struct {
		Title       string    `json:"title"`
		PayValue    int64     `json:"payValue"`
		ActualValue int64     `json:"actualValue"`
		Stock       int64     `json:"stock"`
		BeginTime   time.Time `json:"beginTime"`
		EndTime     time.Time `json:"endTime"`
		// Buckets (optional, default 1) splits a hot voucher's stock
		// over that many shards: core.Voucher.Buckets.
		Buckets int `json:"buckets"`
		// Room (optional) sells it through a waiting room.
		Room *roomJSON `json:"room"`
	}
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	room, err := req.Room.room()
	if err != nil {
		return err
	}
	v := core.Voucher{Title: req.Title, PayValue: req.PayValue, ActualValue: req.ActualValue,
		Stock: req.Stock, BeginAt: req.BeginTime, EndAt: req.EndTime, Buckets: req.Buckets, Room: room}
	if err := a.catalog.Create(c.UserContext(), &v); err != nil {
		return err
	}
	a.log.Info("voucher created", "voucher", v.ID, "stock", v.Stock, "begin", v.BeginAt, "end", v.EndAt, "buckets", v.Buckets)
	return c.Status(fiber.StatusCreated).JSON(toVoucherJSON(v))
}

func (a *api) getVoucher(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	v, err := a.catalog.Get(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(toVoucherJSON(v))
}

func (a *api) buy(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	start := time.Now()
	orderID, err := a.gate.Buy(c.UserContext(), shopperID(c), id, c.Get(admissionHeader))
	a.metrics.reserveSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		if r, ok := refusals[err]; ok {
			// The sold-out phase is most of a sale: its answers skip the
			// error handler's lookups and encoding/json.
			a.metrics.seckillRefused[r.code].Inc()
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Status(r.status).Send(r.body)
		}
		a.metrics.seckillResults.WithLabelValues(string(core.CodeOf(err))).Inc()
		return err
	}
	a.metrics.seckillOK.Inc()
	// Written by hand: this is the hottest response, and a map through
	// encoding/json cost more than the rest of the handler around the
	// reservation. The id is digits only, so nothing needs escaping.
	body := make([]byte, 0, 40)
	body = append(body, `{"orderId":"`...)
	body = strconv.AppendInt(body, orderID, 10)
	body = append(body, `"}`...)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// refusal is a ready answer to one of the seckill's refusals.
type refusal struct {
	code   core.Code
	status int
	body   []byte
}

// refusals are the answers to the seckill's sentinel refusals, encoded
// once, exactly as handleError would write them.
var refusals = func() map[error]refusal {
	out := map[error]refusal{}
	for _, err := range []error{core.ErrSoldOut, core.ErrNotStarted, core.ErrEnded, core.ErrAlreadyPurchased} {
		code := core.CodeOf(err)
		body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": string(code), "message": core.MessageOf(err)}})
		out[err] = refusal{code: code, status: statusOf(code), body: body}
	}
	return out
}()

func (a *api) orderOfVoucher(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	orderID, status, err := a.seckill.OrderOf(c.UserContext(), shopperID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"orderId": strconv.FormatInt(orderID, 10), "status": status})
}

func (a *api) getOrder(c *fiber.Ctx) error {
	id, err := pathID(c, "orderId")
	if err != nil {
		return err
	}
	o, err := a.seckill.Order(c.UserContext(), shopperID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(orderJSON(o))
}

// orderJSON is an order as the API shows it: payBy while it can be paid,
// cancelReason once cancelled.
func orderJSON(o core.Order) fiber.Map {
	status := o.Status
	if status == "" {
		status = core.StatusCreated
	}
	out := fiber.Map{
		"orderId":    strconv.FormatInt(o.ID, 10),
		"voucherId":  o.VoucherID,
		"status":     status,
		"createTime": o.CreatedAt.UTC(),
	}
	if !o.PayBy.IsZero() && status == core.StatusCreated {
		out["payBy"] = o.PayBy.UTC()
	}
	if o.CancelReason != "" {
		out["cancelReason"] = o.CancelReason
	}
	return out
}

// cancelOrder is the shopper's cancellation of their unpaid order: its
// unit goes back on sale at once.
func (a *api) cancelOrder(c *fiber.Ctx) error {
	id, err := pathID(c, "orderId")
	if err != nil {
		return err
	}
	if err := a.whenPersisted(c.UserContext(), shopperID(c), id, errCancelNotYet, func() error {
		_, err := a.lifecycle.Cancel(c.UserContext(), shopperID(c), id)
		return err
	}); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"orderId": strconv.FormatInt(id, 10), "status": core.StatusCancelled})
}

// A shopper who taps Pay or Cancel as soon as the reservation is answered
// may reach the order before its consumer persisted it (milliseconds,
// usually). /pay and /cancel wait for such an order — one whose id was
// issued less than justReservedAge ago — up to justReservedWait, rather
// than call it unknown.
const (
	justReservedAge  = 10 * time.Second
	justReservedWait = time.Second
)

// whenPersisted runs op, and again every 50 ms while it finds no order
// whose id is that recent and that the live store holds as the shopper's
// reservation, for up to justReservedWait. Still not there, the order is
// queued behind a slow consumer: the answer is notYet, a 409 that says to
// ask again, as the contract has it for a queued order. Another shopper's
// order is 404 at once, as ever (the database has it, and it is not the
// caller's), and so is an id neither the live store nor the database
// holds: a made-up id costs a few reads, not a second of polling, and its
// answer takes as long as a real one's.
func (a *api) whenPersisted(ctx context.Context, userID, orderID int64, notYet error, op func() error) error {
	err := op()
	if !errors.Is(err, core.ErrOrderNotFound) || time.Since(redisreserve.IssuedAt(orderID)) > justReservedAge {
		return err
	}
	if a.inDatabase(ctx, orderID) {
		// Persisted since op looked (or another shopper's): op again
		// finds it, or says 404 for another shopper's.
		return op()
	}
	if !a.liveHolds(ctx, userID, orderID) {
		return err
	}
	deadline := time.Now().Add(justReservedWait)
	for errors.Is(err, core.ErrOrderNotFound) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
		err = op()
	}
	if errors.Is(err, core.ErrOrderNotFound) && !a.inDatabase(ctx, orderID) {
		return notYet
	}
	return err
}

// liveHolds reports whether the live store holds the order as the
// shopper's reservation of a voucher on sale when its id was issued (a
// failed read counts as held: the wait follows, as for a queued order).
func (a *api) liveHolds(ctx context.Context, userID, orderID int64) bool {
	vouchers := a.catalog.OpenAt(ctx, redisreserve.IssuedAt(orderID))
	held, err := a.seckill.HoldsOrder(ctx, userID, orderID, vouchers)
	return err != nil || held
}

// inDatabase reports whether the database holds the order, whoever's it
// is (a failed read counts as held: the answer stays 404).
func (a *api) inDatabase(ctx context.Context, orderID int64) bool {
	_, err := a.orders.FindOrder(ctx, orderID)
	return !errors.Is(err, core.ErrOrderNotFound)
}

var (
	errPayNotYet    = core.E(core.CodeNotPayable, "the order is still being recorded: ask again in a moment")
	errCancelNotYet = core.E(core.CodeNotCancellable, "the order is still being recorded: ask again in a moment")
)

// payOrder starts the payment of the shopper's unpaid order.
func (a *api) payOrder(c *fiber.Ctx) error {
	id, err := pathID(c, "orderId")
	if err != nil {
		return err
	}
	var p core.Payment
	var url string
	if err := a.whenPersisted(c.UserContext(), shopperID(c), id, errPayNotYet, func() (err error) {
		p, url, err = a.payments.Pay(c.UserContext(), shopperID(c), id)
		return err
	}); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"paymentId": p.ID, "payUrl": url, "amount": p.Amount})
}

// paymentNotify takes a provider's notification. The provider verifies
// it; a 200 tells the provider it is recorded, anything else makes it
// send the notification again.
func (a *api) paymentNotify(c *fiber.Ctx) error {
	res, err := a.payments.Notify(c.UserContext(), c.Params("provider"), c.Body(), func(h string) string { return c.Get(h) })
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"result": res})
}

// paymentIDPattern is what a payment id looks like (core.Payments makes
// 24 hex digits): anything else is not looked up.
var paymentIDPattern = regexp.MustCompile(`^[0-9a-f]{1,32}$`)

// sandboxPayment is what the sandbox's pay page shows: the payment's order
// (its status, what was bought) and amount. Anyone with the payment id
// may see it, as on a provider's own pay page.
func (a *api) sandboxPayment(c *fiber.Ctx) error {
	p, err := a.sandboxLookup(c)
	if err != nil {
		return err
	}
	out := fiber.Map{"paymentId": p.ID, "orderId": strconv.FormatInt(p.OrderID, 10), "amount": p.Amount}
	o, err := a.orders.FindOrder(c.UserContext(), p.OrderID)
	if err != nil {
		return core.Wrap("sandbox: the payment's order", core.CodeUnavailable, err)
	}
	out["orderStatus"] = orderJSON(o)["status"]
	if v, err := a.catalog.Get(c.UserContext(), o.VoucherID); err == nil {
		out["title"] = v.Title
	}
	return c.JSON(out)
}

func (a *api) sandboxLookup(c *fiber.Ctx) (core.Payment, error) {
	id := c.Params("paymentId")
	if !paymentIDPattern.MatchString(id) {
		return core.Payment{}, core.E(core.CodeBadRequest, "paymentId: want the id /pay answered")
	}
	p, err := a.paymentsDB.FindPayment(c.UserContext(), id)
	if errors.Is(err, core.ErrPaymentUnknown) {
		return core.Payment{}, core.E(core.CodeOrderNotFound, "no such payment")
	}
	return p, err
}

// sandboxComplete is the sandbox's pay page's button: the sandbox makes
// its signed notification and the shop takes it through the path every
// provider's takes (verify, record once, carry out).
func (a *api) sandboxComplete(c *fiber.Ctx) error {
	var in struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(c.Body(), &in); err != nil || (in.Status != "succeeded" && in.Status != "failed") {
		return core.E(core.CodeBadRequest, `want {"status": "succeeded"} or {"status": "failed"}`)
	}
	p, err := a.sandboxLookup(c)
	if err != nil {
		return err
	}
	// A provider's page takes no second payment for what its merchant
	// already has the money of: the outside review paid a paid order again
	// and the second transaction was refunded. Refused before any money
	// moves.
	o, err := a.orders.FindOrder(c.UserContext(), p.OrderID)
	if err != nil {
		return core.Wrap("sandbox: the payment's order", core.CodeUnavailable, err)
	}
	if in.Status == "succeeded" && (o.Status == core.StatusPaid || o.Status == core.StatusRefunded) {
		return core.E(core.CodeNotPayable, "this order is paid already: nothing was charged")
	}
	body, signature := a.sandbox.Notification(p, in.Status == "succeeded")
	res, err := a.payments.Notify(c.UserContext(), paysandbox.Name, body, func(h string) string {
		if strings.EqualFold(h, paysandbox.SignatureHeader) {
			return signature
		}
		return ""
	})
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"result": res})
}

// me is the shopper: their id and phone (null for a token whose id no
// login made: any validly signed token is a shopper).
func (a *api) me(c *fiber.Ctx) error {
	id := shopperID(c)
	phone, err := a.shoppers.UserPhone(c.UserContext(), id)
	switch {
	case errors.Is(err, mysqlstore.ErrNoSuchUser):
		return c.JSON(fiber.Map{"userId": id, "phone": nil})
	case err != nil:
		return core.Wrap("me", core.CodeUnavailable, err)
	}
	return c.JSON(fiber.Map{"userId": id, "phone": phone, "phoneDisplay": core.DisplayPhone(phone)})
}

// myOrdersLimit bounds /api/orders: a shopper's latest orders.
const myOrdersLimit = 100

// myOrders lists the shopper's persisted orders, newest first, ended
// sales included (an order reserved a moment ago may not be there yet).
func (a *api) myOrders(c *fiber.Ctx) error {
	orders, err := a.shoppers.OrdersOfUser(c.UserContext(), shopperID(c), myOrdersLimit)
	if err != nil {
		return core.Wrap("my orders", core.CodeUnavailable, err)
	}
	out := make([]fiber.Map, len(orders))
	for i, o := range orders {
		out[i] = orderJSON(o)
	}
	return c.JSON(fiber.Map{"orders": out})
}
