package server

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
)

// operatorRoutes are the operator's routes, behind the admin token: the
// vouchers, a voucher's audit and rebuild, the dead letters and the
// dashboard's figures.
type operatorRoutes struct {
	catalog *core.Catalog
	log     *slog.Logger
	// voucherAdmin lists the vouchers for the operator; userAdmin reports
	// what the admin decides on.
	voucherAdmin interface {
		VoucherSummaries(ctx context.Context, before int64, limit int) ([]core.VoucherSummary, error)
	}
	userAdmin interface {
		PhoneCollisions(context.Context) ([]core.PhoneCollision, error)
	}
	// repairs audit and reconcile a voucher's live state (admin.go).
	repairs voucherRepairs
	// deadLetters is the register of dead letters; desk re-drives and
	// discards them.
	deadLetters deadletters.Register
	desk        *deadletters.Desk
	dashboard   *dashboard
	// steering is the actions on running sales (steering_routes.go).
	steering *steeringRoutes
}

func (a *operatorRoutes) mount(app *fiber.App, e *api) {
	admin := e.adminGate.require
	app.Post("/api/admin/vouchers", admin, a.createVoucher)
	app.Get("/api/admin/vouchers", admin, a.adminVouchers)
	app.Get("/api/admin/vouchers/:id/audit", admin, a.auditVoucher)
	app.Get("/api/admin/users/phone-collisions", admin, a.phoneCollisions)
	app.Post("/api/admin/vouchers/:id/reconcile", admin, a.reconcileVoucher)
	app.Get("/api/admin/deadletters", admin, a.listDeadLetters)
	app.Get("/api/admin/deadletters/:id", admin, a.showDeadLetter)
	app.Post("/api/admin/deadletters/redrive", admin, a.redriveDeadLetters)
	app.Post("/api/admin/deadletters/discard", admin, a.discardDeadLetters)
	// The page is public; its figures (live sales, dead letters, order
	// volume) are the operator's.
	app.Get("/api/dashboard", admin, a.dashboardData)
	app.Get("/api/dashboard/charts/:name", admin, pageHeaders, a.dashboardChart)
	a.steering.mount(app, e)
}

// phoneCollisions lists the phones several users share once normalised
// (accounts made before numbers were normalised): each logs in as the
// oldest of its users.
func (a *operatorRoutes) phoneCollisions(c *fiber.Ctx) error {
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
func (a *operatorRoutes) adminVouchers(c *fiber.Ctx) error {
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
		case v.Paused():
			state = "paused"
		}
		out[i] = fiber.Map{"id": v.ID, "title": v.Title, "payValue": v.PayValue, "actualValue": v.ActualValue,
			"databaseStock": v.Stock, "beginTime": v.BeginAt.UTC(), "endTime": v.EndAt.UTC(), "state": state, "paused": v.Paused(),
			"orders": fiber.Map{"unpaid": v.Unpaid, "paid": v.Paid, "cancelled": v.Cancelled, "refunded": v.Refunded}}
	}
	var next any
	if len(list) == limit {
		next = list[len(list)-1].ID
	}
	return c.JSON(fiber.Map{"vouchers": out, "next": next})
}

func (a *operatorRoutes) createVoucher(c *fiber.Ctx) error {
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
