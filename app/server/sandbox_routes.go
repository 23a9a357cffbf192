package server

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/adapters/paysandbox"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/payments"
)

// sandboxRoutes are the built-in sandbox's pages and its API — the pay
// page and its complete step, the status query and the refund — mounted
// only when the sandbox is the provider. They play the provider's server:
// the notice of a completed payment goes to the shop's notification path,
// the one every provider's takes (verify, record once, carry out), at
// once, later, or never (SECKILL_PAYSANDBOX_DROP_NOTICES, …_DELAY_NOTICES).
type sandboxRoutes struct {
	sandbox  *paysandbox.Sandbox
	payments *payments.Service
	// paymentsDB finds recorded payments.
	paymentsDB interface {
		FindPayment(ctx context.Context, id string) (core.Payment, error)
	}
	orders interface {
		FindOrder(ctx context.Context, orderID int64) (core.Order, error)
	}
	catalog *core.Catalog
	courier *paysandbox.Courier
}

func newSandboxRoutes(s *Server, sandbox *paysandbox.Sandbox, payments *payments.Service) *sandboxRoutes {
	r := &sandboxRoutes{sandbox: sandbox, payments: payments, paymentsDB: s.store.Payments(), orders: s.store, catalog: s.catalog}
	r.courier = paysandbox.NewCourier(func(ctx context.Context, body []byte, signature string) error {
		_, err := r.notify(ctx, body, signature)
		return err
	}, s.log)
	return r
}

func (a *sandboxRoutes) mount(app *fiber.App, _ *api) {
	app.Get(paysandbox.PagePath+":paymentId", pageHeaders, pageFile("pay.html"))
	// The provider's API, which the shop's side calls signed.
	app.Get("/api/payments/sandbox/payments/:paymentId", a.sandboxStatus)
	app.Post("/api/payments/sandbox/payments/:paymentId/refund", requireJSON, a.sandboxRefund)
	app.Get("/api/payments/sandbox/:paymentId", a.sandboxPayment)
	app.Post("/api/payments/sandbox/:paymentId/complete", requireJSON, a.sandboxComplete)
}

// paymentIDPattern is what a payment id looks like (payments.Service makes
// 24 hex digits): anything else is not looked up.
var paymentIDPattern = regexp.MustCompile(`^[0-9a-f]{1,32}$`)

// sandboxPayment is what the sandbox's pay page shows: the payment's order
// (its status, what was bought) and amount. Anyone with the payment id
// may see it, as on a provider's own pay page.
func (a *sandboxRoutes) sandboxPayment(c *fiber.Ctx) error {
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

func (a *sandboxRoutes) sandboxLookup(c *fiber.Ctx) (core.Payment, error) {
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

// sandboxComplete is the sandbox's pay page's button: the sandbox takes
// the money (or records the failure) in its books and answers what it
// did; its notice to the shop travels apart — here at once (and the shop's
// result is in the answer), after the order's deadline, or never.
func (a *sandboxRoutes) sandboxComplete(c *fiber.Ctx) error {
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
	word, body, signature, err := a.sandbox.Complete(c.UserContext(), p, in.Status == "succeeded")
	if err != nil {
		return core.Wrap("sandbox: take the payment", core.CodeUnavailable, err)
	}
	out := fiber.Map{"paymentId": p.ID, "status": word.State, "txnId": word.TxnID}
	switch a.sandbox.NoticeFate() {
	case paysandbox.Lost:
		out["notice"] = "lost"
	case paysandbox.Delayed:
		out["notice"] = "delayed"
		a.courier.Later(o.PayBy.Add(time.Second), body, signature)
	default:
		out["notice"] = "sent"
		res, err := a.notify(c.UserContext(), body, signature)
		if err != nil {
			// Not taken now: the courier tries again, as a provider does.
			a.courier.Later(time.Now().Add(time.Second), body, signature)
			out["notice"] = "retrying"
		} else {
			out["result"] = res
		}
	}
	return c.JSON(out)
}

// notify hands a notice to the shop's notification path.
func (a *sandboxRoutes) notify(ctx context.Context, body []byte, signature string) (core.NoticeResult, error) {
	return a.payments.Notify(ctx, paysandbox.Name, body, func(h string) string {
		if strings.EqualFold(h, paysandbox.SignatureHeader) {
			return signature
		}
		return ""
	})
}

// sandboxStatus is the provider's status query: only the shop asks (the
// request's path signed with the sandbox's secret, as its notices are),
// and the answer is signed too.
func (a *sandboxRoutes) sandboxStatus(c *fiber.Ctx) error {
	if !a.sandbox.Valid([]byte(c.Path()), c.Get(paysandbox.SignatureHeader)) {
		return core.ErrBadSignature
	}
	word, err := a.sandbox.Look(c.UserContext(), c.Params("paymentId"))
	if errors.Is(err, core.ErrPaymentUnknown) {
		return core.E(core.CodeOrderNotFound, "the sandbox has no such payment")
	}
	if err != nil {
		return core.Wrap("sandbox: status", core.CodeUnavailable, err)
	}
	return a.signedWord(c, c.Params("paymentId"), word)
}

// sandboxRefund is the provider's refund request: signed (the body), one
// refund per idempotency key ("key", or the Idempotency-Key header); the
// amount defaults to all the payment took and has not given back.
func (a *sandboxRoutes) sandboxRefund(c *fiber.Ctx) error {
	if !a.sandbox.Valid(c.Body(), c.Get(paysandbox.SignatureHeader)) {
		return core.ErrBadSignature
	}
	var in struct {
		Amount *int64 `json:"amount"`
		Key    string `json:"key"`
	}
	if err := json.Unmarshal(c.Body(), &in); err != nil {
		return core.E(core.CodeBadRequest, `want {"amount": minor units, "key": "an idempotency key"}`)
	}
	if in.Key == "" {
		in.Key = c.Get("Idempotency-Key")
	}
	if in.Key == "" || len(in.Key) > 128 {
		return core.E(core.CodeBadRequest, "an idempotency key (key, or the Idempotency-Key header) of 1 to 128 characters is required")
	}
	id := c.Params("paymentId")
	word, err := a.sandbox.Look(c.UserContext(), id)
	if errors.Is(err, core.ErrPaymentUnknown) {
		return core.E(core.CodeOrderNotFound, "the sandbox has no such payment")
	}
	if err != nil {
		return core.Wrap("sandbox: refund", core.CodeUnavailable, err)
	}
	amount := word.Taken - word.Refunded
	if in.Amount != nil {
		amount = *in.Amount
	}
	word, err = a.sandbox.GiveBack(c.UserContext(), core.RefundRequest{PaymentID: id, OrderID: word.OrderID, Amount: amount, Key: in.Key})
	if err != nil {
		return core.Wrap("sandbox: refund", core.CodeUnavailable, err)
	}
	return a.signedWord(c, id, word)
}

// signedWord answers the sandbox's word on a payment, signed.
func (a *sandboxRoutes) signedWord(c *fiber.Ctx, id string, w core.ProviderPayment) error {
	refunds := make([]fiber.Map, len(w.Refunds))
	for i, r := range w.Refunds {
		refunds[i] = fiber.Map{"amount": r.Amount, "at": r.At.UTC().Format(time.RFC3339Nano)}
	}
	out := fiber.Map{"paymentId": id, "orderId": strconv.FormatInt(w.OrderID, 10), "status": w.State, "amount": w.Amount,
		"taken": w.Taken, "refunded": w.Refunded, "refunds": refunds, "txnId": w.TxnID}
	if !w.TakenAt.IsZero() {
		out["takenAt"] = w.TakenAt.UTC().Format(time.RFC3339Nano)
	}
	body, err := json.Marshal(out)
	if err != nil {
		return err
	}
	c.Set(paysandbox.SignatureHeader, a.sandbox.Sign(body))
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}
