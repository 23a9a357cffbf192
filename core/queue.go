package core

import (
	"context"
	"errors"
	"time"
)

// Guarantees declares what a queue backend promises. The conformance suite
// checks every declared guarantee, and shows the undeclared ones failing.
type Guarantees struct {
	// DurableAcrossConsumerCrash: a message a consumer held when it died is
	// delivered again (to it after a restart, or to another consumer).
	DurableAcrossConsumerCrash bool
	// Acknowledged: a message stays owed until the consumer acks it.
	Acknowledged bool
	// Replayable: messages can be read again after they were consumed.
	Replayable bool
	// CompetingConsumers: consumers in different processes share the work,
	// each message going to one of them. (Within one process every backend
	// hands each message to one consumer.)
	CompetingConsumers bool
	// RetainsWithoutConsumer: a message published while no consumer runs is
	// kept until one does.
	RetainsWithoutConsumer bool
}

// Delivery is one message as a consumer received it.
type Delivery struct {
	// ID identifies the message on its backend (a stream entry id, say).
	ID string
	// Body is the encoded order (see EncodeOrder).
	Body []byte
	// Attempt counts deliveries of this message, 1 for the first.
	Attempt int
}

// Queue is the seam between the reservation and persistence. Publishing is
// done by the reservation script for the Redis backends, or by a Publisher
// for the in-process one; a Queue hands out consumers.
type Queue interface {
	// Name is the SECKILL_QUEUE value that selects this backend.
	Name() string
	Guarantees() Guarantees
	// Consumer returns a consumer for one goroutine. index numbers the
	// consumers of this process from 0.
	Consumer(index int) (Consumer, error)
	Close() error
}

// Consumer receives deliveries in batches and acknowledges them explicitly.
type Consumer interface {
	// Fetch blocks until at least one delivery is available, ctx is done
	// (it then returns ctx.Err()), or the queue has nothing for a while (it
	// then returns no deliveries and no error, so the caller can check ctx).
	Fetch(ctx context.Context, max int) ([]Delivery, error)
	// Ack marks deliveries done. Acking twice is harmless.
	Ack(ctx context.Context, ds []Delivery) error
	// DeadLetter moves one delivery to the dead-letter destination with a
	// reason, and acks it: the queue moves on without it.
	DeadLetter(ctx context.Context, d Delivery, reason string) error
	Close() error
}

// Publisher is implemented by backends whose messages are enqueued outside
// the reservation script (the in-process queue).
type Publisher interface {
	// Publish enqueues a body, or returns ErrQueueFull at once.
	Publish(ctx context.Context, body []byte) error
}

// MaintainedQueue is implemented by backends with background duties
// (trimming, reclaiming); the pipeline runs Maintain while it runs.
type MaintainedQueue interface {
	Maintain(ctx context.Context)
}

// DrainingQueue is implemented by backends that hold messages in process
// memory: on shutdown the pipeline keeps consuming until Fetch comes back
// empty, instead of stopping at once and losing them.
type DrainingQueue interface {
	DrainOnStop()
}

// QueueStats is a snapshot of a queue for metrics. A field is -1 where the
// backend has no such thing (or cannot tell cheaply).
type QueueStats struct {
	// Depth: messages waiting, not yet delivered to a consumer.
	Depth int64
	// Pending: delivered and not yet acknowledged.
	Pending int64
	// Lag: how far the consumers are behind the newest message, in time.
	Lag time.Duration
	// OldestPending: age of the oldest pending message.
	OldestPending time.Duration
	// DeadLetters: messages in the dead-letter destination.
	DeadLetters int64
}

// UnknownStats has every field unknown; backends start from it.
var UnknownStats = QueueStats{Depth: -1, Pending: -1, Lag: -1, OldestPending: -1, DeadLetters: -1}

// StatsReporter is implemented by backends that can describe their state.
type StatsReporter interface {
	Stats(ctx context.Context) (QueueStats, error)
}

// ErrQueueFull: a bounded queue refused a message.
var ErrQueueFull = errors.New("queue full")
