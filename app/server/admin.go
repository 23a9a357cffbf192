package server

import (
	"github.com/gofiber/fiber/v2"
)

// The operators' view of a voucher after Redis lost or went back in time:
// GET …/audit compares Redis with MySQL and the queue and changes nothing;
// POST …/reconcile rebuilds Redis's state of the voucher from them now and
// says what changed (the request path does the same on its own when it
// finds the state missing or from another Redis incarnation).

func (a *operatorRoutes) auditVoucher(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	if a.recovery == nil {
		v, orders, _, err := a.ledger.SaleSnapshot(ctx, id, nil)
		if err != nil {
			return err
		}
		return c.JSON(fiber.Map{"voucherId": id, "backend": a.backend,
			"mysql":       fiber.Map{"stock": v.Stock, "orders": len(orders)},
			"differences": []string{}, "note": "this backend sells from the database: there is no Redis state to compare"})
	}
	au, err := a.recovery.Audit(ctx, id)
	if err != nil {
		return err
	}
	queue := fiber.Map{"knowsHeld": au.QueueHolds, "held": au.Held, "heldUnpersisted": au.HeldUnpersisted, "deadLettered": au.Lettered}
	if st, err := a.queueStats.Stats(ctx); err == nil {
		// Of the whole queue, every voucher's: -1 where the backend cannot tell.
		queue["queuedAllVouchers"], queue["pendingAllVouchers"] = st.Depth, st.Pending
	}
	differences := au.Differences
	if differences == nil {
		differences = []string{}
	}
	return c.JSON(fiber.Map{
		"voucherId": id, "backend": a.backend, "incarnation": au.Incarnation,
		"redis": fiber.Map{"present": au.Live.Present, "stock": au.Live.Stock, "buyers": len(au.Live.Buyers),
			"fenced": au.Live.Fenced, "verifiedIn": au.Live.VerifiedIn},
		"mysql":         fiber.Map{"stock": au.DatabaseStock, "orders": au.DatabaseOrders},
		"queue":         queue,
		"expectedStock": au.ExpectedStock,
		"differences":   differences,
	})
}

func (a *operatorRoutes) reconcileVoucher(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	if a.recovery == nil {
		if _, _, _, err := a.ledger.SaleSnapshot(ctx, id, nil); err != nil {
			return err
		}
		return c.JSON(fiber.Map{"voucherId": id, "backend": a.backend, "changed": false,
			"note": "this backend sells from the database: there is no Redis state to rebuild"})
	}
	r, err := a.recovery.Reconcile(ctx, id)
	if err != nil {
		return err
	}
	a.log.Warn("voucher reconciled by an operator", "voucher", id, "stock_before", r.StockBefore, "stock", r.StockAfter,
		"buyers_before", r.BuyersBefore, "buyers", r.BuyersAfter)
	return c.JSON(fiber.Map{
		"voucherId": id, "backend": a.backend, "incarnation": r.Incarnation, "previousIncarnation": r.Previous,
		"changed":     r.StockBefore != r.StockAfter || r.BuyersBefore != r.BuyersAfter || r.Previous != r.Incarnation,
		"stockBefore": r.StockBefore, "stockAfter": r.StockAfter,
		"buyersBefore": r.BuyersBefore, "buyersAfter": r.BuyersAfter,
		"persisted": r.Persisted, "held": r.Held, "heldUnpersisted": r.HeldOnly,
		"tookMs": r.Took.Milliseconds(),
	})
}
