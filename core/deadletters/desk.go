package deadletters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Withdrawer gives up an order the database does not have: its cancelled
// row with a pending release, and its unit back on sale, once
// (core.Lifecycle.Withdraw). false: the database has a row with its id.
type Withdrawer interface {
	Withdraw(ctx context.Context, o core.Order) (bool, error)
}

// OrderFinder finds a persisted order (core.OrderReader's FindOrder).
type OrderFinder interface {
	FindOrder(ctx context.Context, orderID int64) (core.Order, error)
}

// LiveUnits is the live sale's side of a re-drive (the Redis
// reservation's upkeep, redisreserve.Live): an order is persisted only
// once its unit is its own there, and the unit of one the database refuses
// as its buyer's second goes back, once.
type LiveUnits interface {
	TakeBack(ctx context.Context, orders []core.Order) ([]core.TakeBack, error)
	ReturnRefused(ctx context.Context, o core.Order, held int64) (core.ReturnResult, error)
}

// DatabaseUnits stands in for the live sale where the database is the
// live state (sync): the persist itself checks the stock column.
type DatabaseUnits struct{}

// TakeBack says each unit is its order's: the database decides.
func (DatabaseUnits) TakeBack(_ context.Context, orders []core.Order) ([]core.TakeBack, error) {
	return make([]core.TakeBack, len(orders)), nil // core.UnitHeld
}

// ReturnRefused has nothing to return: the database took no stock.
func (DatabaseUnits) ReturnRefused(context.Context, core.Order, int64) (core.ReturnResult, error) {
	return core.NothingToReturn, nil
}

// Bodies tells a body this deployment wrote (core.OrderSigner on an
// outside broker, which anyone who reaches it can write).
type Bodies interface {
	Valid(body []byte, signature string) bool
}

// OwnQueue stands in for Bodies where only this deployment writes the
// queue (Redis, memory): every body is ours.
type OwnQueue struct{}

// Valid says every body is ours.
func (OwnQueue) Valid([]byte, string) bool { return true }

// Observer is told how many letters each action resolved, and how.
type Observer interface {
	DeadLettersResolved(how Resolution, n int)
	// OrdersRedriven is told what a re-drive's insert did: the orders it
	// persisted count with the consumers' (the operator's run found the
	// persisted orders' figure leaving them out).
	OrdersRedriven(res core.SaveResult)
}

// DeskConfig is what the operator's desk works with.
type DeskConfig struct {
	Register Register
	// Store persists a re-driven order the way the consumers do; Orders
	// finds an order a discard found in the database.
	Store  core.OrderStore
	Orders OrderFinder
	// Withdrawer discards (the lifecycle).
	Withdrawer Withdrawer
	// Units makes each order's unit its own in the live sale before it is
	// persisted (nil: DatabaseUnits, the database is the live state).
	Units LiveUnits
	// Guard rebuilds a voucher whose live state cannot say whose a unit
	// is (not loaded, or not whole: an evicted buyers hash), so that the
	// re-drive that skipped it for now can go through the next time
	// (nil: core.NoRecovery).
	Guard core.LiveGuard
	// Bodies: a re-drive persists only a body whose signature verifies
	// (nil: OwnQueue).
	Bodies Bodies
	// PayWindow is the pipeline's: a re-driven order's deadline is its
	// reservation's time plus it, as if persisted on time.
	PayWindow time.Duration
	// Limit is how many re-drives a letter gets (SECKILL_REDRIVE_LIMIT;
	// default 3): past it, a re-drive skips the letter.
	Limit int
	// Batch is how many letters one step takes (default 500).
	Batch    int
	Observer Observer
	Now      func() time.Time
}

// Desk re-drives and discards dead letters: what an operator does with
// them. Each action takes every open letter a filter matches, a batch at a
// time, however many there are.
type Desk struct{ cfg DeskConfig }

// NewDesk makes a desk over cfg.
func NewDesk(cfg DeskConfig) *Desk {
	if cfg.Limit <= 0 {
		cfg.Limit = 3
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Units == nil {
		cfg.Units = DatabaseUnits{}
	}
	cfg.Guard = core.GuardOr(cfg.Guard)
	if cfg.Bodies == nil {
		cfg.Bodies = OwnQueue{}
	}
	return &Desk{cfg: cfg}
}

// Outcome is what an action did: how many letters it re-drove (persisted,
// or found persisted), skipped (they stay open), or discarded; of those
// skipped, Refused were tried and refused (the signature, the live unit
// or the database said no: each letter records why), the rest never
// tried (no order of ours, past the re-drive limit). More: it stopped at
// its budget with letters left, for the next call to take on.
type Outcome struct {
	Redriven, Skipped, Refused, Discarded int
	More                                  bool
}

// Count is how many open letters f matches: a dry run's answer.
func (d *Desk) Count(ctx context.Context, f Filter) (int64, error) {
	f.Resolved = false
	page, err := d.cfg.Register.List(ctx, f, 0, 1)
	return page.Open, err
}

// each calls step with every open letter f matches, a batch at a time,
// until the letters run out (false) or budget passes with some left
// (true): between two batches, or within one when step says it stopped
// there (a zero budget is none).
func (d *Desk) each(ctx context.Context, f Filter, budget time.Time, step func([]Letter) (stopped bool, err error)) (bool, error) {
	f.Resolved = false
	for after := int64(0); ; {
		page, err := d.cfg.Register.List(ctx, f, after, d.cfg.Batch)
		if err != nil {
			return false, err
		}
		if stopped, err := step(page.Letters); stopped || err != nil {
			return stopped, err
		}
		if after = page.Next; after == 0 {
			return false, nil
		}
		if d.spent(budget) {
			return true, nil
		}
	}
}

// spent says budget (if not zero) has passed.
func (d *Desk) spent(budget time.Time) bool { return !budget.IsZero() && d.cfg.Now().After(budget) }

// Redrive puts every open letter f matches through the consumers'
// persistence again: an order already in the database is resolved
// without a second row (persisted); one the database takes is resolved
// (redriven); one it refuses again stays open with the new reason and
// one more re-drive counted. A letter with no order of ours (poison, an
// unauthenticated message) or past the limit is skipped.
//
// Past budget (if not zero) it stops between two batches: Outcome.More.
func (d *Desk) Redrive(ctx context.Context, f Filter, budget time.Time) (Outcome, error) {
	var out Outcome
	var err error
	out.More, err = d.each(ctx, f, budget, func(letters []Letter) (bool, error) {
		return false, d.redrive(ctx, letters, &out)
	})
	return out, err
}

func (d *Desk) redrive(ctx context.Context, letters []Letter, out *Outcome) error {
	byOrder := map[int64][]int64{} // letter ids by order id
	var orders []core.Order
	for _, l := range letters {
		o, err := core.DecodeOrder(l.Body)
		if err != nil || l.Reason == core.DeadLetterUnauthenticated || l.Redriven >= d.cfg.Limit {
			out.Skipped++
			continue
		}
		if !d.cfg.Bodies.Valid(l.Body, l.Signature) {
			// Not believed whatever its kind says: the review re-drove
			// records published straight to the dead-letter queue.
			if err := d.failed(ctx, []int64{l.ID}, "re-drive refused (unauthenticated): the body does not carry this deployment's signature, so it is never persisted", out); err != nil {
				return err
			}
			continue
		}
		if _, seen := byOrder[o.ID]; !seen {
			o.PayBy = o.CreatedAt.Add(d.cfg.PayWindow)
			orders = append(orders, o)
		}
		byOrder[o.ID] = append(byOrder[o.ID], l.ID)
	}
	if len(orders) == 0 {
		return nil
	}
	ids := make([]int64, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
	}
	persisted, err := d.cfg.Register.PersistedOrders(ctx, ids)
	if err != nil {
		return err
	}
	var found, fresh []core.Order
	for _, o := range orders {
		if persisted[o.ID] {
			found = append(found, o)
		} else {
			fresh = append(fresh, o)
		}
	}
	if err := d.resolve(ctx, lettersOf(found, byOrder), Persisted, "", &out.Redriven); err != nil {
		return err
	}
	return d.persist(ctx, fresh, byOrder, out)
}

// persist saves the orders not in the database yet, and resolves their
// letters, or records what refused them. An order is persisted only once
// its unit is its own in the live sale (LiveUnits.TakeBack): a unit that
// went back on sale (a rebuild dealt the stock anew, or the letter was a
// refused second order whose unit was returned) is taken back where one is
// left, atomically, else the letter is skipped and says why.
func (d *Desk) persist(ctx context.Context, orders []core.Order, byOrder map[int64][]int64, out *Outcome) error {
	orders, err := d.takeBack(ctx, orders, byOrder, out)
	if err != nil || len(orders) == 0 {
		return err
	}
	res, err := d.cfg.Store.SaveOrders(ctx, orders)
	if err != nil {
		return core.Wrap("re-drive: persist", core.CodeUnavailable, err)
	}
	d.cfg.Observer.OrdersRedriven(res)
	refused := map[int64]bool{}
	for _, rej := range res.Rejected {
		refused[rej.Order.ID] = true
		kind := rej.Kind
		if kind == "" {
			kind = core.DeadLetterStockAnomaly
		}
		detail := fmt.Sprintf("re-drive refused (%s): %s", kind, rej.Reason)
		if kind == core.DeadLetterBuyerHoldsAnother {
			detail += d.returnRefused(ctx, rej)
		}
		if err := d.failed(ctx, byOrder[rej.Order.ID], detail, out); err != nil {
			return err
		}
	}
	var taken []core.Order
	for _, o := range orders {
		if !refused[o.ID] {
			taken = append(taken, o)
		}
	}
	return d.resolve(ctx, lettersOf(taken, byOrder), Redriven, "", &out.Redriven)
}

// takeBack returns the orders whose unit is their own in the live sale;
// the others' letters are skipped with the reason.
func (d *Desk) takeBack(ctx context.Context, orders []core.Order, byOrder map[int64][]int64, out *Outcome) ([]core.Order, error) {
	taken, err := d.cfg.Units.TakeBack(ctx, orders)
	if err != nil {
		return nil, core.Wrap("re-drive: take the units back", core.CodeUnavailable, err)
	}
	own := orders[:0:0]
	for i, o := range orders {
		if t := taken[i]; t.Persistable() {
			own = append(own, o)
			continue
		}
		if taken[i].Result == core.TakeBackLater {
			// Started, not waited for: the skipped letter says to re-drive
			// it again, and by then the state is whole.
			_ = d.cfg.Guard.Lost(ctx, o.VoucherID, core.DontWait)
		}
		if err := d.failed(ctx, byOrder[o.ID], "re-drive skipped: "+taken[i].Why(), out); err != nil {
			return nil, err
		}
	}
	return own, nil
}

// returnRefused gives back the live unit of an order the database refused
// as its buyer's second, as the consumers do, and says so for the letter.
func (d *Desk) returnRefused(ctx context.Context, rej core.Rejection) string {
	return core.RefusedUnitNote(d.cfg.Units.ReturnRefused(ctx, rej.Order, rej.Held))
}

// failed records a re-drive that did not persist letters ids, for detail.
func (d *Desk) failed(ctx context.Context, ids []int64, detail string, out *Outcome) error {
	for _, id := range ids {
		if err := d.cfg.Register.Failed(ctx, id, detail, d.cfg.Now()); err != nil {
			return err
		}
		out.Skipped++
		out.Refused++
	}
	return nil
}

// Discard resolves every open letter f matches without persisting it:
// an order of ours that the database does not have is withdrawn (its
// cancelled row, and its unit back on sale once: see Withdrawer); one it
// has already is resolved as persisted, nothing changed. A letter with no
// order to withdraw (poison, unauthenticated, or an id another order
// holds: reconcile that voucher) is resolved as it is.
//
// Past budget (if not zero) it stops between two letters: Outcome.More.
func (d *Desk) Discard(ctx context.Context, f Filter, note string, budget time.Time) (Outcome, error) {
	var out Outcome
	var err error
	out.More, err = d.each(ctx, f, budget, func(letters []Letter) (bool, error) {
		for i, l := range letters {
			if i > 0 && d.spent(budget) {
				return true, nil // past the budget, after one letter at least
			}
			how, err := d.discard(ctx, l)
			if err != nil {
				return false, err
			}
			if err := d.resolve(ctx, []int64{l.ID}, how, note, &out.Discarded); err != nil {
				return false, err
			}
		}
		return false, nil
	})
	return out, err
}

// discard withdraws l's order if it is one to withdraw, and says how l
// is resolved.
func (d *Desk) discard(ctx context.Context, l Letter) (Resolution, error) {
	o, err := core.DecodeOrder(l.Body)
	switch {
	case err != nil, l.Reason == core.DeadLetterUnauthenticated, l.Reason == core.DeadLetterIDCollision:
		return Discarded, nil
	}
	withdrawn, err := d.cfg.Withdrawer.Withdraw(ctx, o)
	if err != nil {
		return "", core.Wrap("discard: withdraw the order", core.CodeUnavailable, err)
	}
	if withdrawn {
		return Discarded, nil
	}
	found, err := d.cfg.Orders.FindOrder(ctx, o.ID)
	if err != nil && !errors.Is(err, core.ErrOrderNotFound) {
		return "", core.Wrap("discard: find the order", core.CodeUnavailable, err)
	}
	if found.Status == core.StatusCancelled {
		return Discarded, nil // withdrawn before (a discard cut short), or expired: its unit came back then
	}
	return Persisted, nil
}

// resolve resolves ids as how and adds what it resolved to count.
func (d *Desk) resolve(ctx context.Context, ids []int64, how Resolution, note string, count *int) error {
	if len(ids) == 0 {
		return nil
	}
	n, err := d.cfg.Register.Resolve(ctx, ids, how, note, d.cfg.Now())
	if err != nil {
		return err
	}
	*count += int(n)
	d.cfg.Observer.DeadLettersResolved(how, int(n))
	return nil
}

func lettersOf(orders []core.Order, byOrder map[int64][]int64) []int64 {
	var ids []int64
	for _, o := range orders {
		ids = append(ids, byOrder[o.ID]...)
	}
	return ids
}

type nopObserver struct{}

func (nopObserver) DeadLettersResolved(Resolution, int) {}

func (nopObserver) OrdersRedriven(core.SaveResult) {}
