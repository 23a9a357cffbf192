package server

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
)

// The dead-letter register's pages: a default and a most per request (the
// list has no cap: the cursor goes on).
const (
	deadLetterPage    = 100
	deadLetterMaxPage = 1000
)

// A re-drive or a discard starts no new batch (letter) past bulkBudget,
// and answers "more" if letters are left: one call stays well inside the
// server's 10 s write timeout whatever the database's pace. bulkWorkLimit
// bounds the work a call has under way.
const (
	bulkBudget    = 4 * time.Second
	bulkWorkLimit = 30 * time.Second
)

// deadLetterFilter reads the filter of a list or of a bulk action:
// reason, voucher, since and until (RFC 3339).
func deadLetterFilter(reason, voucher, since, until string) (deadletters.Filter, error) {
	var f deadletters.Filter
	if reason != "" {
		f.Reason = core.DeadLetterReason(reason)
		if !slices.Contains(deadletters.Reasons, f.Reason) {
			return f, badRequest("reason must be one of %v", deadletters.Reasons)
		}
	}
	if voucher != "" {
		id, err := strconv.ParseInt(voucher, 10, 64)
		if err != nil || id <= 0 {
			return f, badRequest("voucher must be a positive integer")
		}
		f.VoucherID = id
	}
	for _, t := range []struct {
		name, value string
		into        *time.Time
	}{{"since", since, &f.Since}, {"until", until, &f.Until}} {
		if t.value == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, t.value)
		if err != nil {
			return f, badRequest("%s must be an RFC 3339 time, such as 2026-12-06T10:00:00Z", t.name)
		}
		*t.into = at
	}
	return f, nil
}

// listDeadLetters: GET /api/admin/deadletters, filtered on the server,
// a page at a time (cursor, limit); state=resolved lists the resolved ones.
func (a *operatorRoutes) listDeadLetters(c *fiber.Ctx) error {
	f, err := deadLetterFilter(c.Query("reason"), c.Query("voucher"), c.Query("since"), c.Query("until"))
	if err != nil {
		return err
	}
	switch c.Query("state") {
	case "", "open":
	case "resolved":
		f.Resolved = true
	default:
		return badRequest("state must be open or resolved")
	}
	after := int64(0)
	if v := c.Query("cursor"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return badRequest("cursor must be a nextCursor of an earlier page")
		}
	}
	limit := deadLetterPage
	if v := c.Query("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > deadLetterMaxPage {
			return badRequest("limit must be between 1 and %d", deadLetterMaxPage)
		}
	}
	page, err := a.deadLetters.List(c.UserContext(), f, after, limit)
	if err != nil {
		return core.Wrap("list dead letters", core.CodeUnavailable, err)
	}
	items := make([]fiber.Map, len(page.Letters))
	for i, l := range page.Letters {
		items[i] = deadLetterJSON(l)
	}
	var next any
	if page.Next != 0 {
		next = strconv.FormatInt(page.Next, 10)
	}
	return c.JSON(fiber.Map{"items": items, "nextCursor": next, "open": page.Open})
}

// showDeadLetter: GET /api/admin/deadletters/:id, with the message as
// delivered (as text when it is UTF-8, else base64 with bodyEncoding).
func (a *operatorRoutes) showDeadLetter(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	l, err := a.deadLetters.Letter(c.UserContext(), id)
	if errors.Is(err, deadletters.ErrNotFound) {
		return core.E(core.CodeDeadLetterNotFound, "no dead letter has that id")
	}
	if err != nil {
		return core.Wrap("show a dead letter", core.CodeUnavailable, err)
	}
	item := deadLetterJSON(l)
	item["source"], item["position"], item["consumer"] = l.Source, l.Position, l.Consumer
	if utf8.Valid(l.Body) {
		item["body"] = string(l.Body)
	} else {
		item["body"], item["bodyEncoding"] = l.Body, "base64" // []byte marshals as base64
	}
	return c.JSON(item)
}

// deadLetterJSON is a letter as the list shows it (ids as strings; an id
// the body did not carry is null).
func deadLetterJSON(l deadletters.Letter) fiber.Map {
	id := func(v int64) any {
		if v == 0 {
			return nil
		}
		return strconv.FormatInt(v, 10)
	}
	m := fiber.Map{"id": strconv.FormatInt(l.ID, 10), "orderId": id(l.Order.ID), "userId": id(l.Order.UserID),
		"voucherId": id(l.Order.VoucherID), "reason": l.Reason, "error": l.Error, "deliveries": l.Deliveries,
		"firstFailedAt": l.FirstFailed.UTC().Format(time.RFC3339Nano), "lastFailedAt": l.LastFailed.UTC().Format(time.RFC3339Nano),
		"redriven": l.Redriven, "backend": l.Backend}
	if l.Resolved != "" {
		m["resolved"], m["resolvedAt"], m["note"] = l.Resolved, l.ResolvedAt.UTC().Format(time.RFC3339Nano), l.Note
	}
	return m
}

// deadLetterAction is the body of a re-drive or a discard: a filter as the
// list's, or ids (strings or numbers), and a dry run that only counts.
type deadLetterAction struct {
	Reason  string `json:"reason"`
	Voucher any    `json:"voucher"`
	Since   string `json:"since"`
	Until   string `json:"until"`
	IDs     []any  `json:"ids"`
	DryRun  bool   `json:"dryRun"`
	Note    string `json:"note"`
	// All says a discard means every open letter (a discard with no
	// filter and no ids is refused otherwise).
	All bool `json:"all"`
}

// idOf reads an id given as a decimal string or a JSON number.
func idOf(v any, what string) (int64, error) {
	var id int64
	var err error
	switch v := v.(type) {
	case string:
		id, err = strconv.ParseInt(v, 10, 64)
	case float64:
		id = int64(v)
		if float64(id) != v {
			err = errors.New("not an integer")
		}
	default:
		err = errors.New("not an id")
	}
	if err != nil || id <= 0 {
		return 0, badRequest("%s must be a positive integer, as a string or a number", what)
	}
	return id, nil
}

// filter is the action's filter.
func (b deadLetterAction) filter() (deadletters.Filter, error) {
	f, err := deadLetterFilter(b.Reason, "", b.Since, b.Until)
	if err != nil {
		return f, err
	}
	if b.Voucher != nil {
		if f.VoucherID, err = idOf(b.Voucher, "voucher"); err != nil {
			return f, err
		}
	}
	for _, v := range b.IDs {
		id, err := idOf(v, "each of ids")
		if err != nil {
			return f, err
		}
		f.IDs = append(f.IDs, id)
	}
	return f, nil
}

// readDeadLetterAction decodes a re-drive's or a discard's body.
func readDeadLetterAction(c *fiber.Ctx) (deadLetterAction, deadletters.Filter, error) {
	var b deadLetterAction
	if err := decodeStrict(c, &b); err != nil {
		return b, deadletters.Filter{}, err
	}
	if b.IDs != nil && len(b.IDs) == 0 {
		return b, deadletters.Filter{}, badRequest("ids is empty: leave it out to take the filter's letters")
	}
	f, err := b.filter()
	return b, f, err
}

// redriveDeadLetters: POST /api/admin/deadletters/redrive.
func (a *operatorRoutes) redriveDeadLetters(c *fiber.Ctx) error {
	return a.actOnDeadLetters(c, func(b deadLetterAction, _ deadletters.Filter) error {
		if b.Note != "" || b.All {
			return badRequest("note and all are a discard's")
		}
		return nil
	}, func(ctx context.Context, f deadletters.Filter, _ deadLetterAction) (fiber.Map, error) {
		out, err := a.desk.Redrive(ctx, f, time.Now().Add(bulkBudget))
		return fiber.Map{"redriven": out.Redriven, "skipped": out.Skipped, "refused": out.Refused, "more": out.More}, err
	})
}

// discardDeadLetters: POST /api/admin/deadletters/discard.
func (a *operatorRoutes) discardDeadLetters(c *fiber.Ctx) error {
	return a.actOnDeadLetters(c, func(b deadLetterAction, f deadletters.Filter) error {
		if !b.All && f.Reason == "" && f.VoucherID == 0 && f.Since.IsZero() && f.Until.IsZero() && len(f.IDs) == 0 {
			return badRequest(`a discard needs a filter or ids; to discard every open letter, say "all": true`)
		}
		return nil
	}, func(ctx context.Context, f deadletters.Filter, b deadLetterAction) (fiber.Map, error) {
		out, err := a.desk.Discard(ctx, f, b.Note, time.Now().Add(bulkBudget))
		return fiber.Map{"discarded": out.Discarded, "more": out.More}, err
	})
}

// actOnDeadLetters reads a re-drive's or a discard's body, checks it,
// and answers a dry run's count, or what act did.
func (a *operatorRoutes) actOnDeadLetters(c *fiber.Ctx, check func(deadLetterAction, deadletters.Filter) error,
	act func(context.Context, deadletters.Filter, deadLetterAction) (fiber.Map, error)) error {
	b, f, err := readDeadLetterAction(c)
	if err != nil {
		return err
	}
	if err := check(b, f); err != nil {
		return err
	}
	// Not the shopper's request deadline: an action goes on for its
	// budget, then answers "more" for the caller to ask again; the work in
	// flight is bounded on its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.UserContext()), bulkWorkLimit)
	defer cancel()
	if b.DryRun {
		n, err := a.desk.Count(ctx, f)
		if err != nil {
			return core.Wrap("count dead letters", core.CodeUnavailable, err)
		}
		return c.JSON(fiber.Map{"matched": n})
	}
	out, err := act(ctx, f, b)
	if err != nil {
		return core.Wrap("act on dead letters", core.CodeUnavailable, err)
	}
	return c.JSON(out)
}
