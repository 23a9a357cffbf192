package core

// Capabilities are what a queue can do beyond Queue's methods. They are
// read here, and only here: every other part of the framework asks a
// Capabilities value, never the queue's type, so what a backend offers is
// stated in one place (Watermill's Features, River's driver). A nil field
// is a capability the queue does not have.
type Capabilities struct {
	// Handoff: the reservation script feeds the queue in its own atomic
	// step (FedByReservation). Publisher: the order is published after the
	// reservation, which is released if the queue refuses it. A queue
	// anything can feed has exactly one of the two.
	Handoff   FedByReservation
	Publisher Publisher
	// Duties are the queue's background work (MaintainedQueue).
	Duties []Duty
	// Stats tells depth, pending, lag and dead letters (StatsReporter).
	Stats StatsReporter
	// Lister lists the orders the queue holds (OrderHolder). Holder is
	// the same, set only for a queue that keeps a message until it is
	// acknowledged: only then is the list complete, which a rebuild needs.
	// One whose consumers take messages out on delivery (the plain list)
	// lists the queued ones but not those delivered and not yet persisted,
	// which a rebuild would then sell again.
	Lister, Holder OrderHolder
	// DeadLetters reads the dead letters back (DeadLetterReader).
	DeadLetters DeadLetterReader
	// Shards is how many shards the queue spans (ShardedQueue); 1 when it
	// is not sharded.
	Shards int
	// Drains: the queue holds messages in process memory, so the pipeline
	// empties it at a stop (DrainingQueue).
	Drains bool
}

// CapabilitiesOf reads what q can do.
func CapabilitiesOf(q Queue) Capabilities {
	c := Capabilities{Shards: 1}
	c.Handoff, _ = q.(FedByReservation)
	if c.Handoff == nil {
		c.Publisher, _ = q.(Publisher)
	}
	if m, ok := q.(MaintainedQueue); ok {
		c.Duties = m.Duties()
	}
	c.Stats, _ = q.(StatsReporter)
	c.Lister, _ = q.(OrderHolder)
	if c.Lister != nil && q.Guarantees().Acknowledged {
		c.Holder = c.Lister
	}
	c.DeadLetters, _ = q.(DeadLetterReader)
	if s, ok := q.(ShardedQueue); ok {
		c.Shards = s.ShardCount()
	}
	_, c.Drains = q.(DrainingQueue)
	return c
}

// ShopperLimitOf is r's own check of the shopper's seckill limit, if it
// keeps one (the Redis reservation does, in its script); nil otherwise.
func ShopperLimitOf(r Reserver) ShopperLimit {
	l, _ := r.(ShopperLimit)
	return l
}
