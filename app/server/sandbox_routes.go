package server

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/adapters/paysandbox"
	"github.com/seckill-lab/seckill/core"
)

// sandboxRoutes are the built-in sandbox's pay page and what it calls:
// mounted only when the sandbox is the provider.
type sandboxRoutes struct {
	sandbox  *paysandbox.Sandbox
	payments *core.Payments
	// paymentsDB finds recorded payments.
	paymentsDB interface {
		FindPayment(ctx context.Context, id string) (core.Payment, error)
	}
	orders interface {
		FindOrder(ctx context.Context, orderID int64) (core.Order, error)
	}
	catalog *core.Catalog
}

func (a *sandboxRoutes) mount(app *fiber.App, _ *api) {
	app.Get(paysandbox.PagePath+":paymentId", pageHeaders, pageFile("pay.html"))
	app.Get("/api/payments/sandbox/:paymentId", a.sandboxPayment)
	app.Post("/api/payments/sandbox/:paymentId/complete", requireJSON, a.sandboxComplete)
}

// paymentIDPattern is what a payment id looks like (core.Payments makes
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

// sandboxComplete is the sandbox's pay page's button: the sandbox makes
// its signed notification and the shop takes it through the path every
// provider's takes (verify, record once, carry out).
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
