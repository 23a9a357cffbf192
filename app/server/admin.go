package server

import (
	"context"
	"log/slog"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
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
	out, err := a.repairs.audit(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(out)
}

func (a *operatorRoutes) reconcileVoucher(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	out, err := a.repairs.reconcile(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(out)
}

// voucherRepairs are the operators' audit and reconcile of one voucher, as
// the answers show them: Redis's state against the database and the queue
// (liveRepairs), or the database alone where it is the live state
// (databaseRepairs, under sync).
type voucherRepairs interface {
	audit(ctx context.Context, id int64) (fiber.Map, error)
	reconcile(ctx context.Context, id int64) (fiber.Map, error)
}

// liveRepairs audit and rebuild the voucher's state in Redis (recovery);
// queueStats tells the queue's depth, where it can.
type liveRepairs struct {
	recovery   *recovery.Guard
	queueStats core.StatsReporter
	backend    string
	log        *slog.Logger
}

func (r liveRepairs) audit(ctx context.Context, id int64) (fiber.Map, error) {
	au, err := r.recovery.Audit(ctx, id)
	if err != nil {
		return nil, err
	}
	queue := fiber.Map{"knowsHeld": au.QueueHolds, "held": au.Held, "heldUnpersisted": au.HeldUnpersisted, "deadLettered": au.Lettered}
	if st, err := r.queueStats.Stats(ctx); err == nil {
		// Of the whole queue, every voucher's: -1 where the backend cannot tell.
		queue["queuedAllVouchers"], queue["pendingAllVouchers"] = st.Depth, st.Pending
	}
	differences := au.Differences
	if len(differences) == 0 {
		differences = []string{} // [] in the answer, never null
	}
	return fiber.Map{
		"voucherId": id, "backend": r.backend, "incarnation": au.Incarnation,
		"redis": fiber.Map{"present": au.Live.Present, "stock": au.Live.Stock, "buyers": len(au.Live.Buyers),
			"fenced": au.Live.Fenced, "verifiedIn": au.Live.VerifiedIn},
		"mysql":         fiber.Map{"stock": au.DatabaseStock, "orders": au.DatabaseOrders},
		"queue":         queue,
		"expectedStock": au.ExpectedStock,
		"differences":   differences,
	}, nil
}

func (r liveRepairs) reconcile(ctx context.Context, id int64) (fiber.Map, error) {
	rec, err := r.recovery.Reconcile(ctx, id)
	if err != nil {
		return nil, err
	}
	r.log.Warn("voucher reconciled by an operator", "voucher", id, "stock_before", rec.StockBefore, "stock", rec.StockAfter,
		"buyers_before", rec.BuyersBefore, "buyers", rec.BuyersAfter)
	return fiber.Map{
		"voucherId": id, "backend": r.backend, "incarnation": rec.Incarnation, "previousIncarnation": rec.Previous,
		"changed":     rec.StockBefore != rec.StockAfter || rec.BuyersBefore != rec.BuyersAfter || rec.Previous != rec.Incarnation,
		"stockBefore": rec.StockBefore, "stockAfter": rec.StockAfter,
		"buyersBefore": rec.BuyersBefore, "buyersAfter": rec.BuyersAfter,
		"persisted": rec.Persisted, "held": rec.Held, "heldUnpersisted": rec.HeldOnly,
		"tookMs": rec.Took.Milliseconds(),
	}, nil
}

// databaseRepairs are the audit and reconcile of a backend that sells from
// the database: there is nothing in Redis to compare or rebuild, and the
// answers say so for a voucher the database has.
type databaseRepairs struct {
	ledger  recovery.Ledger
	backend string
}

func (r databaseRepairs) audit(ctx context.Context, id int64) (fiber.Map, error) {
	v, orders, _, err := r.ledger.SaleSnapshot(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	return fiber.Map{"voucherId": id, "backend": r.backend,
		"mysql":       fiber.Map{"stock": v.Stock, "orders": len(orders)},
		"differences": []string{}, "note": "this backend sells from the database: there is no Redis state to compare"}, nil
}

func (r databaseRepairs) reconcile(ctx context.Context, id int64) (fiber.Map, error) {
	if _, _, _, err := r.ledger.SaleSnapshot(ctx, id, nil); err != nil {
		return nil, err
	}
	return fiber.Map{"voucherId": id, "backend": r.backend, "changed": false,
		"note": "this backend sells from the database: there is no Redis state to rebuild"}, nil
}
