package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/steer"
)

// steeringRoutes are the operators' actions on running sales (core/steer):
// pause, resume, end now, a new window, and their record.
type steeringRoutes struct {
	steering *steer.Steering
	// fingerprint names the admin token an action was taken with, in its
	// record, without the token.
	fingerprint string
}

func newSteeringRoutes(st *steer.Steering, adminToken string) *steeringRoutes {
	return &steeringRoutes{steering: st, fingerprint: adminFingerprint(adminToken)}
}

// adminFingerprint names the admin token in the action log without
// giving it away.
func adminFingerprint(adminToken string) string {
	sum := sha256.Sum256([]byte(adminToken))
	return hex.EncodeToString(sum[:8])
}

func (a *steeringRoutes) mount(app *fiber.App, e *api) {
	admin := e.adminGate.require
	app.Post("/api/admin/vouchers/:id/pause", admin, a.action(a.steering.Pause))
	app.Post("/api/admin/vouchers/:id/resume", admin, a.action(a.steering.Resume))
	app.Post("/api/admin/vouchers/:id/end", admin, a.action(a.steering.EndNow))
	app.Patch("/api/admin/vouchers/:id", admin, requireJSON, a.reschedule)
	app.Post("/api/admin/vouchers/:id/stock", admin, requireJSON, a.stock)
	app.Get("/api/admin/actions", admin, a.actions)
	app.Post("/api/admin/sales/pause", admin, a.killSwitch(true))
	app.Post("/api/admin/sales/resume", admin, a.killSwitch(false))
	a.mountConsumers(app, admin)
}

// killSwitch pauses every voucher at once (on), or resumes those it paused:
// {"paused": n} the vouchers the switch holds paused now, and on resume
// {"resumed": n}.
func (a *steeringRoutes) killSwitch(on bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		r, err := a.noted(c, a.operator)
		if err != nil {
			return err
		}
		if on {
			n, err := a.steering.PauseAll(c.UserContext(), r)
			if err != nil {
				return err
			}
			return c.JSON(fiber.Map{"paused": n})
		}
		n, err := a.steering.ResumeAll(c.UserContext(), r)
		if err != nil {
			return err
		}
		return c.JSON(fiber.Map{"paused": 0, "resumed": n})
	}
}

// maxOperatorName bounds X-Seckill-Operator as recorded.
const maxOperatorName = 128

// request reads an action's voucher, operator and note (a body is
// optional: {"note"}).
func (a *steeringRoutes) request(c *fiber.Ctx, body any) (steer.Request, error) {
	id, err := pathID(c, "id")
	if err != nil {
		return steer.Request{}, err
	}
	r, err := a.operator(c, body)
	r.VoucherID = id
	return r, err
}

// operator reads who acts and the body (optional), without a voucher.
func (a *steeringRoutes) operator(c *fiber.Ctx, body any) (steer.Request, error) {
	name := strings.TrimSpace(c.Get("X-Seckill-Operator"))
	if len(name) > maxOperatorName {
		return steer.Request{}, badRequest("X-Seckill-Operator: at most %d bytes", maxOperatorName)
	}
	r := steer.Request{Operator: steer.Operator{Name: name, TokenFingerprint: a.fingerprint}}
	if len(c.Body()) > 0 {
		if err := decodeStrict(c, body); err != nil {
			return r, err
		}
	}
	return r, nil
}

// maxNote bounds an action's note.
const maxNote = 512

func checkNote(note string) error {
	if len(note) > maxNote {
		return badRequest("note: at most %d bytes", maxNote)
	}
	return nil
}

type noteBody struct {
	Note string `json:"note"`
}

// noted reads an action whose body is at most a note, with read (request:
// of a voucher; operator: of none).
func (a *steeringRoutes) noted(c *fiber.Ctx, read func(*fiber.Ctx, any) (steer.Request, error)) (steer.Request, error) {
	var body noteBody
	r, err := read(c, &body)
	if err != nil {
		return r, err
	}
	if err := checkNote(body.Note); err != nil {
		return r, err
	}
	r.Note = body.Note
	return r, nil
}

// action answers a pause, a resume or an end: the voucher's state after.
func (a *steeringRoutes) action(do func(ctx context.Context, r steer.Request) (core.Voucher, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		r, err := a.noted(c, a.request)
		if err != nil {
			return err
		}
		v, err := do(c.UserContext(), r)
		if err != nil {
			return err
		}
		return c.JSON(fiber.Map{"voucherId": v.ID, "state": v.StateAt(time.Now(), 1), "paused": v.Paused(),
			"beginTime": v.BeginAt.UTC(), "endTime": v.EndAt.UTC()})
	}
}

// reschedule moves a voucher's end, or its begin before the sale begins.
func (a *steeringRoutes) reschedule(c *fiber.Ctx) error {
	var body struct {
		BeginTime *time.Time `json:"beginTime"`
		EndTime   *time.Time `json:"endTime"`
		Note      string     `json:"note"`
	}
	r, err := a.request(c, &body)
	if err != nil {
		return err
	}
	if err := checkNote(body.Note); err != nil {
		return err
	}
	if body.BeginTime == nil && body.EndTime == nil {
		return badRequest("give endTime, or beginTime (before the sale begins), or both")
	}
	var w steer.Window
	if body.BeginTime != nil {
		w.BeginAt = *body.BeginTime
	}
	if body.EndTime != nil {
		w.EndAt = *body.EndTime
	}
	r.Note = body.Note
	v, err := a.steering.Reschedule(c.UserContext(), r, w)
	if err != nil {
		return err
	}
	out := toVoucherJSON(v)
	out.State = v.StateAt(time.Now(), 1)
	return c.JSON(out)
}

// stock takes or adds units with sales running: {"delta": N, "note"}.
func (a *steeringRoutes) stock(c *fiber.Ctx) error {
	var body struct {
		Delta *int64 `json:"delta"`
		Note  string `json:"note"`
	}
	r, err := a.request(c, &body)
	if err != nil {
		return err
	}
	if err := checkNote(body.Note); err != nil {
		return err
	}
	if body.Delta == nil {
		return badRequest("delta is required: the units to add (or, negative, to take)")
	}
	r.Note = body.Note
	left, err := a.steering.ChangeStock(c.UserContext(), r, *body.Delta)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"voucherId": r.VoucherID, "stock": left})
}

// actions pages the record: ?voucher=&since=&cursor=&limit=.
func (a *steeringRoutes) actions(c *fiber.Ctx) error {
	var f steer.Filter
	var err error
	if f.VoucherID, f.Since, err = voucherAndSince(c); err != nil {
		return err
	}
	if v := c.Query("cursor"); v != "" {
		if f.Before, err = strconv.ParseInt(v, 10, 64); err != nil || f.Before <= 0 {
			return badRequest("cursor: want the nextCursor of the previous page")
		}
	}
	f.Limit = 50
	if v := c.Query("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > 500 {
			return badRequest("limit: from 1 to 500")
		}
	}
	list, err := a.steering.Actions(c.UserContext(), f)
	if err != nil {
		return err
	}
	items := make([]fiber.Map, len(list))
	for i, x := range list {
		items[i] = fiber.Map{"id": x.ID, "at": x.At, "operator": x.Operator.Name, "tokenFingerprint": x.Operator.TokenFingerprint,
			"action": x.Kind, "voucherId": nullableID(x.VoucherID), "before": x.Before, "after": x.After, "note": x.Note}
	}
	out := fiber.Map{"items": items, "nextCursor": nil}
	if len(list) == f.Limit {
		out["nextCursor"] = strconv.FormatInt(list[len(list)-1].ID, 10)
	}
	return c.JSON(out)
}

func nullableID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// voucherAndSince reads a listing's ?voucher= (0: every voucher) and
// ?since= (zero: from the start).
func voucherAndSince(c *fiber.Ctx) (voucherID int64, since time.Time, err error) {
	if v := c.Query("voucher"); v != "" {
		if voucherID, err = strconv.ParseInt(v, 10, 64); err != nil || voucherID <= 0 {
			return 0, time.Time{}, badRequest("voucher: want a voucher id")
		}
	}
	if v := c.Query("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return 0, time.Time{}, badRequest("since: want an RFC 3339 time")
		}
	}
	return voucherID, since, nil
}
