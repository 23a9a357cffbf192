package core

import "context"

// Capabilities declare a queue backend: its name, what it guarantees, how
// a reservation feeds it, and what it can do beyond handing out consumers.
// A backend states them as data (Queue.Capabilities), the way Watermill
// declares a Pub/Sub's features to its test kit; every other part of the
// framework reads them through CapabilitiesOf, never the queue's type. A
// nil field is a capability the queue does not have.
type Capabilities struct {
	// Name is the SECKILL_QUEUE value that selects the backend.
	Name       string
	Guarantees Guarantees
	// Handoff: the reservation script feeds the queue in its own atomic
	// step. Publisher: the order is published after the reservation, which
	// is released if the queue refuses it. A queue anything can feed has
	// exactly one of the two; a Handoff wins if both are set.
	Handoff   *Handoff
	Publisher Publisher
	// Forwarder: an outside broker, fed by a relay from an outbox the
	// reservation writes (relay.New joins the two). A broker declares it and
	// neither of the above.
	Forwarder Forwarder
	// Relay tells the relay of a relayed queue (set by relay.New).
	Relay RelayReporter
	// Intake turns shoppers away before anything is reserved while the
	// queue cannot take orders (a relayed queue whose outbox is full; nil:
	// OpenIntake).
	Intake Intake
	// Duties are the queue's background work, run while its consumers run.
	Duties []Duty
	// Stats tells depth, pending, lag and dead letters.
	Stats StatsReporter
	// Lister lists the orders the queue holds.
	Lister OrderHolder
	// BucketLister, beside the Lister of a queue over several shards, lists
	// a voucher's held orders from every shard its buckets are on
	// (ShardQueues' join declares it; a queue of one shard holds them all).
	BucketLister BucketOrderHolder
	// Holding tells whether a queue without a Lister holds any order at
	// all, for a rebuild after the live store's loss (see HoldingProbe).
	Holding HoldingProbe
	// DeadLetters are the places the queue keeps its dead letters (a
	// sharded queue's and a relayed one's are all their parts').
	DeadLetters []DeadLetterSource
	// Shards is how many queues of one backend this one joins
	// (ShardQueues), each needing a consumer in every process; 0 or 1 for
	// a queue that is not sharded.
	Shards int
	// Drains: the queue holds messages in process memory, so the pipeline
	// keeps consuming at a stop until it is empty, instead of stopping at
	// once and losing them.
	Drains bool

	// Holder is Lister, set by CapabilitiesOf only for a queue that keeps a
	// message until it is acknowledged: only then is the list complete,
	// which a rebuild needs. One whose consumers take messages out on
	// delivery (the plain list) lists the queued ones but not those
	// delivered and not yet persisted, which a rebuild would then sell
	// again. What a backend sets here is ignored.
	Holder OrderHolder
}

// CapabilitiesOf reads what q declares, with what follows from it filled
// in: one shard at least, no Publisher beside a Handoff, and Holder.
func CapabilitiesOf(q Queue) Capabilities {
	c := q.Capabilities()
	c.Shards = max(c.Shards, 1)
	if c.Handoff != nil {
		c.Publisher = nil
	}
	c.Holder = nil
	if c.Lister != nil && c.Guarantees.Acknowledged {
		c.Holder = c.Lister
	}
	return c
}

// HeldOrdersOf lists the voucher's orders the queue holds (Holder, which
// must be set), from every shard its buckets are on.
func (c Capabilities) HeldOrdersOf(ctx context.Context, v Voucher) ([]Order, error) {
	if c.BucketLister != nil && v.BucketCount() > 1 {
		return c.BucketLister.HeldBucketOrders(ctx, v.ID, v.BucketCount())
	}
	return c.Holder.HeldOrders(ctx, v.ID)
}
