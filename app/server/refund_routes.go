package server

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/refund"
)

// refundRoutes are an operator's refunds of paid orders: one, or a sweep.
// enabled is false on a shop without payments (409 payments_disabled).
type refundRoutes struct {
	refunds     *refund.Refunds
	enabled     bool
	fingerprint string
}

func (a *refundRoutes) mount(app *fiber.App, e *api) {
	admin := e.adminGate.require
	app.Post("/api/admin/orders/refund", admin, requireJSON, a.sweep)
	app.Post("/api/admin/orders/:orderId/refund", admin, a.refundOne)
}

type refundBody struct {
	Note       string `json:"note"`
	ReturnUnit bool   `json:"returnUnit"`
}

// request reads who refunds and the body (optional) into body, whose
// note and returnUnit it takes.
func (a *refundRoutes) request(c *fiber.Ctx, body any, how *refundBody) (refund.Request, error) {
	if !a.enabled {
		return refund.Request{}, core.ErrPaymentsDisabled
	}
	name := strings.TrimSpace(c.Get("X-Seckill-Operator"))
	if len(name) > maxOperatorName {
		return refund.Request{}, badRequest("X-Seckill-Operator: at most %d bytes", maxOperatorName)
	}
	if len(c.Body()) > 0 {
		if err := decodeStrict(c, body); err != nil {
			return refund.Request{}, err
		}
	}
	if err := checkNote(how.Note); err != nil {
		return refund.Request{}, err
	}
	return refund.Request{ReturnUnit: how.ReturnUnit, Operator: name, Fingerprint: a.fingerprint, Note: how.Note}, nil
}

// refundOne is POST /api/admin/orders/{orderId}/refund {"note",
// "returnUnit"}: 200 {"status": "refunded"} once begun here or before.
func (a *refundRoutes) refundOne(c *fiber.Ctx) error {
	id, err := pathID(c, "orderId")
	if err != nil {
		return err
	}
	var body refundBody
	r, err := a.request(c, &body, &body)
	if err != nil {
		return err
	}
	r.OrderID = id
	began, err := a.refunds.Refund(c.UserContext(), r)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"orderId": strconv.FormatInt(id, 10), "status": core.StatusRefunded, "already": !began})
}

// sweep is POST /api/admin/orders/refund {"voucher","users","orderIds",
// "dryRun","note","returnUnit"}: {"matched"} with dryRun, else
// {"matched","refunded","skipped","failed"}.
func (a *refundRoutes) sweep(c *fiber.Ctx) error {
	var body struct {
		refundBody
		Voucher  string   `json:"voucher"`
		Users    []int64  `json:"users"`
		OrderIDs []string `json:"orderIds"`
		DryRun   bool     `json:"dryRun"`
	}
	r, err := a.request(c, &body, &body.refundBody)
	if err != nil {
		return err
	}
	s := refund.Sweep{Users: body.Users, DryRun: body.DryRun, Request: r}
	if body.Voucher != "" {
		if s.VoucherID, err = strconv.ParseInt(body.Voucher, 10, 64); err != nil || s.VoucherID <= 0 {
			return badRequest("voucher: want a voucher id")
		}
	}
	if len(body.OrderIDs)+len(body.Users) > refund.MaxSweep {
		return badRequest("at most %d users and order ids", refund.MaxSweep)
	}
	for _, o := range body.OrderIDs {
		id, err := strconv.ParseInt(o, 10, 64)
		if err != nil || id <= 0 {
			return badRequest("orderIds: want order ids (decimal strings)")
		}
		s.OrderIDs = append(s.OrderIDs, id)
	}
	// Not the request's deadline: refunds begun go on to their end; none
	// is begun past the bulk budget, so the answer stays inside the
	// server's write timeout ("more": call again).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.UserContext()), bulkWorkLimit)
	defer cancel()
	s.Until = time.Now().Add(bulkBudget)
	res, err := a.refunds.Sweep(ctx, s)
	if err != nil {
		return err
	}
	if s.DryRun {
		return c.JSON(fiber.Map{"matched": res.Matched, "dryRun": true})
	}
	return c.JSON(fiber.Map{"matched": res.Matched, "refunded": res.Refunded, "skipped": res.Skipped, "failed": res.Failed,
		"more": res.More})
}
