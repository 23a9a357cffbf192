package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/adapters/logincode"
	"github.com/seckill-lab/seckill/core"
)

// loginRoutes are login's routes: a code sent to a phone, and the token
// it is exchanged for.
type loginRoutes struct {
	codes       *logincode.Codes
	delivery    codeDelivery
	devCodes    bool
	phoneRegion string
	// phoneRegions are the regions whose mobile numbers get codes.
	phoneRegions []string
	tokens       *Tokens
	users        core.UserRepository
	clients      *clientAddresses
	metrics      *metrics
	log          *slog.Logger
	// codeRate and loginRate are the per-client-address limits.
	codeRate, loginRate redis_rate.Limit
}

// codeDelivery is how login codes reach phones: a sender, or none
// (noSender: then only dev codes, shown in the answer, or no login at all).
type codeDelivery struct {
	sender   core.CodeSender
	delivers bool
}

// noSender is the sender of a server that has none: it delivers nothing.
type noSender struct{}

func (noSender) Send(context.Context, core.LoginCode) error { return nil }

func (a *loginRoutes) mount(app *fiber.App, e *api) {
	app.Post("/api/auth/code", requireJSON, e.limits.limit("code", a.codeRate, e.clients.limitKey), a.sendCode)
	app.Post("/api/auth/login", requireJSON, e.limits.limit("login", a.loginRate, e.clients.limitKey), a.login)
}

func (a *loginRoutes) sendCode(c *fiber.Ctx) error {
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
	if !a.delivery.delivers && !a.devCodes {
		return core.E(core.CodeUnavailable, "login codes cannot be sent: the server has no code sender configured")
	}
	ctx := c.UserContext()
	code, err := a.codes.Issue(ctx, phone, a.clients.limitKey(c))
	if err != nil {
		return core.Wrap("send code", core.CodeUnavailable, err)
	}
	if err := a.delivery.sender.Send(ctx, code); err != nil {
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
	if a.delivery.delivers {
		a.metrics.codesSent.WithLabelValues("sent").Inc()
	}
	resp := fiber.Map{"sent": true, "challenge": code.Challenge, "codeDigits": len(code.Code)}
	if a.devCodes {
		a.metrics.codesSent.WithLabelValues("dev").Inc()
		resp["code"] = code.Code
	}
	return c.JSON(resp)
}

// loginVerdicts are the metric label and the answer of each verdict.
var loginVerdicts = map[logincode.Verdict]struct{ label, message string }{
	logincode.Accepted: {"ok", ""},
	logincode.Wrong:    {"wrong", "wrong code"},
	logincode.Burned:   {"burned", "wrong code, and that was the last try: ask for a new code"},
	logincode.NoCode:   {"no_code", "no code is waiting under this challenge (expired, used or burned): ask for a new one"},
}

func (a *loginRoutes) login(c *fiber.Ctx) error {
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
