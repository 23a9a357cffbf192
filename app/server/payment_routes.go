package server

import (
	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/core/payments"
)

// paymentRoutes are the providers' notifications, and the provider's own
// pages where it has them (the built-in sandbox's pay page; a shopper's
// /pay is the shopper's routes').
type paymentRoutes struct {
	payments *payments.Service
	// pages are the provider's own routes: sandboxRoutes for the built-in
	// sandbox, noRoutes for any other provider.
	pages routeGroup
	// reconciliation is the operator's report; refunds its refunds.
	reconciliation *reconciliationRoutes
	refunds        *refundRoutes
}

// routeGroup is a group of routes the API mounts.
type routeGroup interface {
	mount(app *fiber.App, e *api)
}

// noRoutes is a group with no routes: what a part that serves none mounts.
type noRoutes struct{}

func (noRoutes) mount(*fiber.App, *api) {}

func (a *paymentRoutes) mount(app *fiber.App, e *api) {
	app.Post("/api/payments/:provider/notify", a.paymentNotify)
	a.pages.mount(app, e)
	a.reconciliation.mount(app, e)
	a.refunds.mount(app, e)
}

// paymentNotify takes a provider's notification. The provider verifies
// it; a 200 tells the provider it is recorded, anything else makes it
// send the notification again.
func (a *paymentRoutes) paymentNotify(c *fiber.Ctx) error {
	res, err := a.payments.Notify(c.UserContext(), c.Params("provider"), c.Body(), func(h string) string { return c.Get(h) })
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"result": res})
}
