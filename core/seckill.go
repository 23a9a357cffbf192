package core

import (
	"context"
	"errors"
	"time"
)

// Seckill is the shopper's use case: reserve atomically, hand the order to
// the queue, answer with the order id. Persistence happens later, in the
// Pipeline, so no database is touched on this path (except under the sync
// backend, whose Reserver is the database itself).
type Seckill struct {
	ids      IDGenerator
	reserver Reserver
	// limit is the reservation's own check of the shopper's limit, made
	// before a voucher is looked up (nil: none).
	limit ShopperLimit
	// publisher is nil when the reservation itself enqueues the order.
	publisher Publisher
	orders    OrderReader
	// recovery verifies each voucher's live state before it is used, and
	// rebuilds what the live store forgot.
	recovery LiveGuard
	// memo answers the refusals that cannot change for a while without
	// the live store (one that remembers nothing when none is given).
	memo *AnswerMemo
	// intake turns shoppers away while the queue cannot take orders.
	intake Intake
	// held answers order reads the database cannot (nil: no complete
	// list of the queue's orders to ask).
	held *heldReads
	// trace carries the request's trace in the order.
	trace TraceCarrier
	// letters finds orders held for review in the dead letters.
	letters DeadLettered
	now     func() time.Time
}

// DeadLettered finds the orders a consumer dead-lettered that no operator
// has worked yet: told 200, not in the database, held for review. Only a
// letter whose body this deployment signed names an order.
type DeadLettered interface {
	// HeldOrder is the held order of that id (ok false: none).
	HeldOrder(ctx context.Context, orderID int64) (o Order, ok bool, err error)
	// HeldOrderOf is userID's newest held order of voucherID.
	HeldOrderOf(ctx context.Context, userID, voucherID int64) (o Order, ok bool, err error)
}

// noLetters holds nothing: a deployment whose queue keeps no dead letter.
type noLetters struct{}

func (noLetters) HeldOrder(context.Context, int64) (Order, bool, error) { return Order{}, false, nil }

func (noLetters) HeldOrderOf(context.Context, int64, int64) (Order, bool, error) {
	return Order{}, false, nil
}

// SeckillConfig is what the shopper's use case is made of.
type SeckillConfig struct {
	// IDs makes order ids, Reserver reserves; both required.
	IDs      IDGenerator
	Reserver Reserver
	// Limit is the reservation's own check of the shopper's seckill limit,
	// if it keeps one (the Redis reservation does, in its script): a
	// request that must look the voucher up counts it first, or made-up
	// ids would skip it (nil: the limit is kept elsewhere, or none).
	Limit ShopperLimit
	// Publisher hands the order on after the reservation; nil when the
	// reservation itself enqueues it (Capabilities.Handoff).
	Publisher Publisher
	// Trace puts the request's trace context in the order's message
	// (nil: NoTrace).
	Trace TraceCarrier
	// Orders reads persisted orders (the order endpoints).
	Orders OrderReader
	// Recovery verifies each voucher's live state before it is used (nil:
	// NoRecovery, as under sync, whose live state is the database).
	Recovery LiveGuard
	// Memo answers remembered refusals and is told when stock comes back
	// (nil: a memo that remembers nothing).
	Memo *AnswerMemo
	// Intake is asked before each reservation (Capabilities.Intake; nil:
	// OpenIntake).
	Intake Intake
	// Holder is the queue's complete list of the orders it holds
	// (Capabilities.Holder): while the database cannot be read, an order
	// status read is answered queued for an order it still holds (nil: 503).
	Holder OrderHolder
	// Letters finds the orders held for review in the dead letters (nil:
	// none kept).
	Letters DeadLettered
}

// NewSeckill builds the use case, whole: it panics without IDs or a
// Reserver (a wiring mistake, found at start).
func NewSeckill(cfg SeckillConfig) *Seckill {
	if cfg.IDs == nil || cfg.Reserver == nil {
		panic("core: NewSeckill needs IDs and a Reserver")
	}
	if cfg.Trace == nil {
		cfg.Trace = NoTrace
	}
	if cfg.Intake == nil {
		cfg.Intake = OpenIntake
	}
	if cfg.Memo == nil {
		cfg.Memo = NewAnswerMemo(0, nil)
	}
	if cfg.Letters == nil {
		cfg.Letters = noLetters{}
	}
	return &Seckill{ids: cfg.IDs, reserver: cfg.Reserver, limit: cfg.Limit, publisher: cfg.Publisher, orders: cfg.Orders,
		recovery: GuardOr(cfg.Recovery), memo: cfg.Memo, intake: cfg.Intake, held: newHeldReads(cfg.Holder),
		trace: cfg.Trace, letters: cfg.Letters, now: time.Now}
}

// Buy reserves one voucher for a user and returns the order id: an
// answer from memory if this instance knows it, else the voucher verified
// (the shopper's limit counted first), the reservation, and the order
// handed on to the queue.
func (s *Seckill) Buy(ctx context.Context, userID, voucherID int64) (int64, error) {
	// Cached by the live store's adapter: no round trip.
	incarnation, _ := s.recovery.Incarnation(ctx)
	if err := s.fromMemory(voucherID, userID, incarnation); err != nil {
		return 0, err
	}
	generation := s.memo.Generation()
	if err := s.intake.Accept(ctx); err != nil {
		return 0, err
	}
	counted, err := s.verify(ctx, userID, voucherID)
	if err != nil {
		return 0, err
	}
	id, err := s.ids.NextID(ctx)
	if err != nil {
		return 0, Wrap("seckill: next order id", CodeUnavailable, err)
	}
	o := Order{ID: id, UserID: userID, VoucherID: voucherID, CreatedAt: s.now().UTC(), LimitCounted: counted}
	o.Trace = s.trace.Carry(ctx)
	r, err := s.reserve(ctx, o)
	if err != nil {
		return 0, err
	}
	if err := r.Err(); err != nil {
		if r.Result == AlreadyPurchased {
			s.memo.RememberBuyer(voucherID, userID, r.OrderID, incarnation, generation)
		} else {
			s.memo.Remember(voucherID, incarnation, generation, r)
		}
		return 0, err
	}
	if err := s.handOn(ctx, o); err != nil {
		return 0, err
	}
	if r.Unconfirmed {
		// Reserved and handed on all the same: only its survival of a
		// failover is in doubt (so it is not remembered either).
		return 0, &UnconfirmedError{OrderID: r.OrderID}
	}
	s.memo.RememberBuyer(voucherID, userID, r.OrderID, incarnation, generation)
	return r.OrderID, nil
}

// fromMemory is the answer this instance remembers, if any: the buyer
// before the voucher's refusals, as the script checks (a holder learns the
// order id, never "sold out").
func (s *Seckill) fromMemory(voucherID, userID int64, incarnation string) error {
	if held, ok := s.memo.Buyer(voucherID, userID, incarnation); ok {
		return &AlreadyPurchasedError{OrderID: held}
	}
	if r, ok := s.memo.Answer(voucherID, incarnation); ok {
		return r.Err()
	}
	return nil
}

// verify makes sure the voucher's live state can be used. A voucher
// verified in this incarnation needs nothing more (Trusted is Ensure's
// fast path). Otherwise Ensure may look it up (Redis, then the database):
// the shopper's limit comes first, or made-up ids would skip it, since
// only the reservation script counts it otherwise. counted: the limit
// counted this request (the reservation must not count it again).
func (s *Seckill) verify(ctx context.Context, userID, voucherID int64) (counted bool, err error) {
	if s.recovery.Trusted(ctx, voucherID) {
		return false, nil
	}
	if s.limit != nil {
		r, err := s.limit.Allow(ctx, userID, voucherID)
		if err != nil {
			return false, Wrap("seckill: admit", CodeUnavailable, err)
		}
		if err := r.Err(); err != nil {
			return false, err
		}
		counted = true
	}
	return counted, s.recovery.EnsureShopper(ctx, voucherID, userID)
}

// reserve runs the reservation, once more after a rebuild if the
// voucher's keys were deleted under a running Redis.
func (s *Seckill) reserve(ctx context.Context, o Order) (Reservation, error) {
	r, err := s.reserver.Reserve(ctx, o)
	if err != nil {
		if uc := (*UnconfirmedError)(nil); errors.As(err, &uc) {
			// The reservation's fate is unknown (its call failed as a
			// whole): the shopper gets the order id to look up.
			return r, uc
		}
		return r, Wrap("seckill: reserve", CodeUnavailable, err)
	}
	if r.Result != VoucherMissing {
		return r, nil
	}
	// Verified, yet gone: its keys were deleted under a running Redis.
	if err := s.recovery.Lost(ctx, o.VoucherID, Wait); err != nil {
		return r, err
	}
	if r, err = s.reserver.Reserve(ctx, o); err != nil {
		return r, Wrap("seckill: reserve", CodeUnavailable, err)
	}
	if r.Result == VoucherMissing {
		return r, ErrBusy // rebuilt, and fenced again by another rebuild
	}
	return r, nil
}

// handOn publishes the reserved order where the reservation does not
// enqueue it itself. An order that never entered the queue gives its
// stock back, or it is lost to every other shopper.
func (s *Seckill) handOn(ctx context.Context, o Order) error {
	if s.publisher == nil {
		return nil
	}
	err := s.publisher.Publish(ctx, EncodeOrder(o))
	if err == nil {
		return nil
	}
	if rerr := s.reserver.Release(context.WithoutCancel(ctx), o); rerr != nil {
		return Wrap("seckill: release after failed publish", CodeUnavailable, errors.Join(err, rerr))
	}
	// Best effort: the memo's lifetime bounds a lost nudge.
	_ = s.memo.StockBack(context.WithoutCancel(ctx), o.VoucherID)
	if errors.Is(err, ErrQueueFull) {
		return ErrBusy
	}
	return Wrap("seckill: publish", CodeUnavailable, err)
}

// OrderOf returns the order a user holds for a voucher and where it is in
// its lifecycle (queued: reserved, not yet persisted).
//
// A rebuild of the voucher under way (here or on another instance, or one
// this read starts) is not waited for when the database has the order: it
// answers at once, while the rebuild goes on. Only an order the database
// lacks — queued, or none, which only the rebuilt state tells apart — waits
// for the rebuild, at most orderReadWait, and is busy after that.
func (s *Seckill) OrderOf(ctx context.Context, userID, voucherID int64) (int64, OrderStatus, error) {
	switch err := s.recovery.Ensure(ctx, voucherID, DontWait); {
	case errors.Is(err, ErrVoucherNotFound):
		return 0, "", ErrOrderNotFound
	case errors.Is(err, ErrBusy):
		if id, st, done, err := s.duringRebuild(ctx, userID, voucherID); done || err != nil {
			return id, st, err
		}
	case err != nil:
		return 0, "", err
	}
	id, ok, err := s.reserver.ReservedOrder(ctx, userID, voucherID)
	if err == nil && !ok {
		// No buyer, or no state at all: a live store that forgot the sale
		// since it was verified answers the same. Ask again after the
		// rebuild, if it was that.
		var rebuilt bool
		switch rebuilt, err = s.recovery.Recheck(ctx, voucherID, DontWait); {
		case errors.Is(err, ErrVoucherNotFound):
			return 0, "", ErrOrderNotFound
		case errors.Is(err, ErrBusy):
			if id, st, done, err := s.duringRebuild(ctx, userID, voucherID); done || err != nil {
				return id, st, err
			}
			id, ok, err = s.reserver.ReservedOrder(ctx, userID, voucherID)
		case err != nil:
			return 0, "", err
		case rebuilt:
			id, ok, err = s.reserver.ReservedOrder(ctx, userID, voucherID)
		}
	}
	if err != nil {
		return 0, "", Wrap("order status: reservation", CodeUnavailable, err)
	}
	if !ok {
		// No live order: the shopper's last one, cancelled, if any.
		o, err := s.orders.OrderOfBuyer(ctx, userID, voucherID)
		switch {
		case errors.Is(err, ErrOrderNotFound):
			// Or one held for review (the live store forgot its buyer: a
			// rebuild deals from the database, which never had it).
			if h, held, herr := s.letters.HeldOrderOf(ctx, userID, voucherID); herr == nil && held {
				return h.ID, StatusHeld, nil
			}
			return 0, "", ErrOrderNotFound
		case err != nil:
			return 0, "", Wrap("order status: store", CodeUnavailable, err)
		}
		return o.ID, statusOf(o), nil
	}
	o, err := s.orders.FindOrder(ctx, id)
	switch {
	case err == nil:
		return id, statusOf(o), nil
	case errors.Is(err, ErrOrderNotFound):
		if _, held, herr := s.letters.HeldOrder(ctx, id); herr == nil && held {
			return id, StatusHeld, nil
		}
		return id, StatusQueued, nil
	case s.held.queued(ctx, voucherID, id):
		return id, StatusQueued, nil
	}
	return id, "", &StatusUnreadError{OrderID: id, Err: err}
}

// orderReadWait is how long an order read the database cannot answer
// waits for a rebuild of the voucher before it is busy.
const orderReadWait = time.Second

// duringRebuild answers an order read while a rebuild holds the voucher:
// the database tells a persisted live order at once (done); otherwise the read
// waits for the rebuild, at most orderReadWait, and goes on to the live
// state (not done) or is busy.
func (s *Seckill) duringRebuild(ctx context.Context, userID, voucherID int64) (int64, OrderStatus, bool, error) {
	if o, err := s.orders.OrderOfBuyer(ctx, userID, voucherID); err == nil && o.Live() {
		return o.ID, statusOf(o), true, nil // a cancelled one may have a queued successor
	}
	wctx, cancel := context.WithTimeout(ctx, orderReadWait)
	defer cancel()
	switch err := s.recovery.Ensure(wctx, voucherID, Wait); {
	case err == nil:
		return 0, "", false, nil
	case errors.Is(err, ErrVoucherNotFound):
		return 0, "", true, ErrOrderNotFound
	}
	return 0, "", true, ErrBusy
}

// statusOf is a persisted order's status (created where the store did not
// say).
func statusOf(o Order) OrderStatus {
	if o.Status == "" {
		return StatusCreated
	}
	return o.Status
}

// HoldsOrder reports whether the live store holds orderID as the user's
// reservation of one of vouchers: an order reserved and not yet persisted
// (queued). Redis alone is asked (ReservedOrder), never the database.
func (s *Seckill) HoldsOrder(ctx context.Context, userID, orderID int64, vouchers []int64) (bool, error) {
	for _, v := range vouchers {
		held, ok, err := s.reserver.ReservedOrder(ctx, userID, v)
		if err != nil {
			return false, err
		}
		if ok && held == orderID {
			return true, nil
		}
	}
	return false, nil
}

// Order returns a persisted order if userID owns it. Another user's order is
// reported as not found, so ids cannot be probed.
func (s *Seckill) Order(ctx context.Context, userID, orderID int64) (Order, error) {
	o, err := s.orders.FindOrder(ctx, orderID)
	if errors.Is(err, ErrOrderNotFound) {
		if h, held, herr := s.letters.HeldOrder(ctx, orderID); herr == nil && held {
			o, err = h, nil // held for review: never "not found" to the shopper told 200
		}
	}
	if err != nil {
		return Order{}, Wrap("find order", CodeUnavailable, err)
	}
	if o.UserID != userID {
		return Order{}, ErrOrderNotFound
	}
	return o, nil
}
