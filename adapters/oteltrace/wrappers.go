package oteltrace

import (
	"context"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Store wraps an order store: each batch saved is a span named name (the
// pipeline's "persist orders", the dead letters' "redrive orders") in the
// traces of its orders' requests; queue names where the batch came from.
func (t *Tracer) Store(s core.OrderStore, name, queue string) core.OrderStore {
	return &tracedStore{OrderStore: s, t: t, name: name, queue: queue}
}

type tracedStore struct {
	core.OrderStore
	t           *Tracer
	name, queue string
}

func (s *tracedStore) SaveOrders(ctx context.Context, orders []core.Order) (core.SaveResult, error) {
	ctx, end := s.t.Batch(ctx, s.name, s.queue, orders)
	res, err := s.OrderStore.SaveOrders(ctx, orders)
	end(err)
	return res, err
}

// Broker wraps an outside broker's queue: its forwarder's every attempt
// is a "relay orders" span. A queue that declares no forwarder is
// returned as it is.
func (t *Tracer) Broker(q core.Queue) core.Queue {
	if core.CapabilitiesOf(q).Forwarder == nil {
		return q
	}
	return &tracedBroker{Queue: q, t: t}
}

type tracedBroker struct {
	core.Queue
	t *Tracer
}

func (b *tracedBroker) Capabilities() core.Capabilities {
	c := core.CapabilitiesOf(b.Queue)
	c.Forwarder = &tracedForwarder{f: c.Forwarder, t: b.t, queue: c.Name}
	return c
}

type tracedForwarder struct {
	f     core.Forwarder
	t     *Tracer
	queue string
}

func (f *tracedForwarder) Forward(ctx context.Context, orders []core.Order) error {
	ctx, end := f.t.Batch(ctx, "relay orders", f.queue, orders)
	err := f.f.Forward(ctx, orders)
	end(err)
	return err
}

// Returner wraps the live store a cancelled order's unit goes back to:
// each return is a span in the order's trace, "order cancelled: <why>".
func (t *Tracer) Returner(r core.UnitReturner) core.UnitReturner {
	return &tracedReturner{r: r, t: t}
}

type tracedReturner struct {
	r core.UnitReturner
	t *Tracer
}

func (r *tracedReturner) ReturnUnit(ctx context.Context, o core.Order) (core.ReturnResult, error) {
	name := "return unit"
	if o.CancelReason != "" {
		name = "order cancelled: " + string(o.CancelReason)
	}
	ctx, end := r.t.Follow(ctx, name, o)
	res, err := r.r.ReturnUnit(ctx, o)
	end(err)
	return res, err
}

// Payments wraps the payments' store: a payment started ("pay order") and
// a provider's notice recorded ("payment notice") are spans in the order's
// trace, read with orders.
func (t *Tracer) Payments(s core.PaymentStore, orders core.OrderReader) core.PaymentStore {
	return &tracedPayments{PaymentStore: s, t: t, orders: orders}
}

type tracedPayments struct {
	core.PaymentStore
	t      *Tracer
	orders core.OrderReader
}

// follow starts a span of work on order id in its order's trace.
func (p *tracedPayments) follow(ctx context.Context, name string, orderID int64) (context.Context, func(error)) {
	o, err := p.orders.FindOrder(ctx, orderID)
	if err != nil {
		o = core.Order{ID: orderID}
	}
	return p.t.Follow(ctx, name, o)
}

func (p *tracedPayments) StartPayment(ctx context.Context, pay core.Payment, owner int64) (core.Payment, error) {
	ctx, end := p.follow(ctx, "pay order", pay.OrderID)
	out, err := p.PaymentStore.StartPayment(ctx, pay, owner)
	end(err)
	return out, err
}

func (p *tracedPayments) RecordNotice(ctx context.Context, n core.PaymentNotice, now time.Time) (core.NoticeResult, error) {
	ctx, end := p.follow(ctx, "payment notice", n.OrderID)
	res, err := p.PaymentStore.RecordNotice(ctx, n, now)
	end(err)
	return res, err
}
