package core

import (
	"context"
)

// Forwarder is an outside broker's way in (Capabilities.Forwarder): a
// Kafka, NATS or RabbitMQ queue cannot be written from inside the
// reservation script, so the script writes an outbox in its own atomic
// step and a relay (core/relay) hands the broker what the outbox holds.
type Forwarder interface {
	// Forward publishes the orders to the broker and returns nil once the
	// broker has confirmed every one of them (a JetStream publish ack,
	// Kafka acks=all, a RabbitMQ publisher confirm). An error means some
	// may be unconfirmed: the relay forwards the whole batch again, so the
	// broker may see an order twice (its dedup by order id, or the store's
	// idempotence, absorbs that) and never zero times.
	Forward(ctx context.Context, orders []Order) error
}

// RelayStats describe a relayed queue's relay, for metrics and the
// dashboard. The counts are this process's since it started.
type RelayStats struct {
	// Forwarded: orders the broker confirmed.
	Forwarded int64
	// Failures: forward attempts that failed (each retried), and outbox
	// operations that failed.
	Failures int64
	// LastError is the newest failure's text, "" once a forward succeeds.
	LastError string
	// Outbox is the outbox: Depth, entries no relay has read yet; Pending,
	// read by a relay and not yet confirmed by the broker; Lag, how far
	// the relays are behind the newest reservation.
	Outbox QueueStats
}

// Intake lets a queue turn shoppers away before anything is reserved
// (Capabilities.Intake).
type Intake interface {
	// Accept returns nil, or why no order can be taken now (an error of
	// CodeBusy: the shopper is told to retry).
	Accept(ctx context.Context) error
}

// OpenIntake accepts every order: the intake of a queue that can always
// take one (every queue but a relayed one).
var OpenIntake Intake = openIntake{}

type openIntake struct{}

func (openIntake) Accept(context.Context) error { return nil }

// RelayReporter tells a relayed queue's relay (Capabilities.Relay).
type RelayReporter interface {
	RelayStats(ctx context.Context) (RelayStats, error)
}
