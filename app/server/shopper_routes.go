package server

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/payments"
	"github.com/seckill-lab/seckill/core/room"
)

// shopperRoutes are the shoppers' routes: the vouchers, their waiting
// rooms, the seckill and the shopper's orders.
type shopperRoutes struct {
	catalog *core.Catalog
	// gate is a purchase's one way in: the room's pass checked where the
	// voucher has one.
	gate      *room.Gate
	seckill   *core.Seckill
	lifecycle *core.Lifecycle
	payments  *payments.Service
	// orders finds an order in the database, whoever's it is.
	orders interface {
		FindOrder(ctx context.Context, orderID int64) (core.Order, error)
	}
	// shoppers reads a shopper's phone and orders (/api/me, /api/orders).
	shoppers interface {
		UserPhone(ctx context.Context, userID int64) (string, error)
		OrdersOfUser(ctx context.Context, userID int64, limit int) ([]core.Order, error)
	}
	// rooms are the vouchers' waiting rooms; draws each room's published
	// draw, encoded (int64 -> []byte).
	rooms   *room.Rooms
	draws   sync.Map
	metrics *metrics
	// seckillRate is the per-shopper limit (a rate of 0 where the
	// reservation keeps it); missRate limits the answers
	// voucher_not_found per client address.
	seckillRate, missRate redis_rate.Limit
}

func (a *shopperRoutes) mount(app *fiber.App, e *api) {
	app.Get("/api/vouchers", a.listVouchers)
	misses := e.limits.limitMisses(a.missRate, e.clients.limitKey)
	shopper := e.tokens.requireShopper
	app.Get("/api/vouchers/:id", misses, a.getVoucher)
	app.Post("/api/vouchers/:id/room", misses, shopper, a.joinRoom)
	app.Get("/api/vouchers/:id/room", misses, shopper, a.roomStatus)
	app.Get("/api/vouchers/:id/room/draw", misses, a.roomDraw)
	app.Post("/api/vouchers/:id/seckill", misses, shopper, e.limits.limit("seckill", a.seckillRate, byShopper), a.buy)
	app.Get("/api/vouchers/:id/order", shopper, a.orderOfVoucher)
	app.Get("/api/me", shopper, a.me)
	app.Get("/api/orders", shopper, a.myOrders)
	app.Get("/api/orders/:orderId", shopper, a.getOrder)
	app.Post("/api/orders/:orderId/cancel", shopper, a.cancelOrder)
	app.Post("/api/orders/:orderId/pay", shopper, a.payOrder)
}

type voucherJSON struct {
	ID          int64     `json:"id"`
	Title       string    `json:"title"`
	PayValue    int64     `json:"payValue"`
	ActualValue int64     `json:"actualValue"`
	Stock       int64     `json:"stock"`
	BeginTime   time.Time `json:"beginTime"`
	EndTime     time.Time `json:"endTime"`
	// State is the sale's: not_started, on_sale, paused, sold_out, ended.
	State core.SaleState `json:"state"`
	// Buckets is shown only for a voucher split over several (a hot one).
	Buckets int `json:"buckets,omitempty"`
	// Room is shown for a voucher sold through a waiting room, with
	// RoomCommitment (the draw's seed's SHA-256) from its creation on.
	Room           *roomJSON `json:"room,omitempty"`
	RoomCommitment string    `json:"roomCommitment,omitempty"`
}

func toVoucherJSON(v core.Voucher) voucherJSON {
	out := voucherJSON{ID: v.ID, Title: v.Title, PayValue: v.PayValue, ActualValue: v.ActualValue,
		Stock: v.Stock, BeginTime: v.BeginAt.UTC(), EndTime: v.EndAt.UTC(), State: v.StateAt(time.Now(), v.Stock)}
	if v.Buckets > 1 {
		out.Buckets = v.Buckets
	}
	showRoom(&out, v)
	return out
}

func (a *shopperRoutes) getVoucher(c *fiber.Ctx) error {
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

func (a *shopperRoutes) buy(c *fiber.Ctx) error {
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

func (a *shopperRoutes) orderOfVoucher(c *fiber.Ctx) error {
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

func (a *shopperRoutes) getOrder(c *fiber.Ctx) error {
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
func (a *shopperRoutes) cancelOrder(c *fiber.Ctx) error {
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
func (a *shopperRoutes) whenPersisted(ctx context.Context, userID, orderID int64, notYet error, op func() error) error {
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
func (a *shopperRoutes) liveHolds(ctx context.Context, userID, orderID int64) bool {
	vouchers := a.catalog.OpenAt(ctx, redisreserve.IssuedAt(orderID))
	held, err := a.seckill.HoldsOrder(ctx, userID, orderID, vouchers)
	return err != nil || held
}

// inDatabase reports whether the database holds the order, whoever's it
// is (a failed read counts as held: the answer stays 404).
func (a *shopperRoutes) inDatabase(ctx context.Context, orderID int64) bool {
	_, err := a.orders.FindOrder(ctx, orderID)
	return !errors.Is(err, core.ErrOrderNotFound)
}

var (
	errPayNotYet    = core.E(core.CodeNotPayable, "the order is still being recorded: ask again in a moment")
	errCancelNotYet = core.E(core.CodeNotCancellable, "the order is still being recorded: ask again in a moment")
)

// payOrder starts the payment of the shopper's unpaid order.
func (a *shopperRoutes) payOrder(c *fiber.Ctx) error {
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

// me is the shopper: their id and phone (null for a token whose id no
// login made: any validly signed token is a shopper).
func (a *shopperRoutes) me(c *fiber.Ctx) error {
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
func (a *shopperRoutes) myOrders(c *fiber.Ctx) error {
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
