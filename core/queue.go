package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// CountsDeliveries: a message delivered again says how often
	// (Delivery.Attempt), so one that keeps coming back unpersisted ends
	// as a max_deliveries dead letter (PipelineConfig.MaxDeliveries)
	// instead of being tried for ever. Without it every delivery is the
	// first.
	CountsDeliveries bool
}

// Delivery is one message as a consumer received it.
type Delivery struct {
	// ID identifies the message on its backend (a stream entry id, say).
	ID string
	// Body is the encoded order (see EncodeOrder).
	Body []byte
	// Attempt counts deliveries of this message, 1 for the first.
	Attempt int
	// Signature is the OrderSigner's signature the message carried (an
	// outside broker's header; "" if none). The pipeline checks it when it
	// has a Signer.
	Signature string
}

// Queue is the seam between the reservation and persistence, and the one
// interface a queue backend implements. Publishing is done by the
// reservation script for the Redis backends (Capabilities.Handoff), or
// after the reservation for the in-process one (Capabilities.Publisher); a
// Queue hands out consumers, and declares the rest as data.
type Queue interface {
	// Capabilities declares the backend: its name, what it guarantees, how
	// a reservation feeds it, and what it can do beyond consuming. It is
	// read once, when the queue is wired, through CapabilitiesOf.
	Capabilities() Capabilities
	// Consumer returns a consumer for one goroutine. index numbers the
	// consumers of this process from 0; ctx bounds what setting it up
	// takes (registering it, taking back what a predecessor of the same
	// name left). A consumer's background upkeep (a heartbeat, say) is one
	// of the queue's Duties, which must run while its consumers do.
	Consumer(ctx context.Context, index int) (Consumer, error)
	Close() error
}

// Consumer receives deliveries in batches and acknowledges them explicitly.
type Consumer interface {
	// Fetch blocks until at least one delivery is available, ctx is done
	// (it then returns ctx.Err()), or the queue has nothing for a while (it
	// then returns no deliveries and no error, so the caller can check ctx).
	//
	// Fetch never returns a delivery this process still holds: fetched by
	// any of its consumers and not yet acked or dead-lettered, however
	// long it is held (the pipeline fetches a batch before it acks the
	// previous one, and a failing store holds one for as long as it
	// fails). A delivery that reached the backend's bookkeeping and never
	// this consumer (a reply lost to a broken connection) is delivered,
	// once, later. The conformance suite (core/queuetest) holds every
	// backend to both.
	Fetch(ctx context.Context, max int) ([]Delivery, error)
	// Ack marks deliveries done. Acking twice is harmless.
	Ack(ctx context.Context, ds []Delivery) error
	// DeadLetter moves one delivery to the dead-letter destination with a
	// reason, and acks it: the queue moves on without it.
	DeadLetter(ctx context.Context, d Delivery, reason string) error
	Close() error
}

// Publisher enqueues orders outside the reservation script: the in-process
// queue's way in (Capabilities.Publisher).
type Publisher interface {
	// Publish enqueues a body, or returns ErrQueueFull at once.
	Publish(ctx context.Context, body []byte) error
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

// StatsReporter describes a queue's state (Capabilities.Stats).
type StatsReporter interface {
	Stats(ctx context.Context) (QueueStats, error)
}

// ErrQueueFull: a bounded queue refused a message.
var ErrQueueFull = errors.New("queue full")

// Handoff is how the reservation feeds a queue inside its own atomic step:
// right after it takes the stock, the reservation script runs Command, so
// an order is never reserved without being enqueued, nor enqueued without
// being reserved. A queue fed this way declares its Handoff
// (Capabilities.Handoff): the command, the key per voucher and the message
// layout are the adapter's, and the script carries out what it is given.
type Handoff struct {
	// Command is the command and its arguments, with HandoffKey standing
	// for the queue key and HandoffBody for the encoded order (EncodeOrder),
	// e.g. {"XADD", HandoffKey, "*", "order", HandoffBody}. It may write no
	// key but HandoffKey: every key a script touches is declared to it.
	Command []string
	// Key is the queue key an order of the voucher goes to. It is passed
	// with the voucher's own keys, so on a Redis Cluster it must share
	// their hash slot. It must name the same key for a voucher every
	// time: the reservation asks once and keeps the name.
	Key func(voucherID int64) string
	// CountsReceivers: the command's integer reply is how many consumers
	// received the order (PUBLISH); 0 means nobody will persist it.
	CountsReceivers bool
}

// Placeholders in Handoff.Command.
const (
	HandoffKey  = "$key"
	HandoffBody = "$body"
)

// Validate reports a Handoff the reservation could not carry out.
func (h Handoff) Validate() error {
	keys, bodies := 0, 0
	for _, a := range h.Command {
		switch a {
		case HandoffKey:
			keys++
		case HandoffBody:
			bodies++
		}
	}
	switch {
	case len(h.Command) == 0 || h.Command[0] == HandoffKey || h.Command[0] == HandoffBody:
		return errors.New("handoff: the command must start with its name")
	case keys != 1:
		return fmt.Errorf("handoff %s: want %s exactly once, got %d", h.Command[0], HandoffKey, keys)
	case bodies == 0:
		return fmt.Errorf("handoff %s: the order body (%s) is never sent", h.Command[0], HandoffBody)
	case h.Key == nil:
		return fmt.Errorf("handoff %s: no Key function", h.Command[0])
	}
	return nil
}

// OrderHolder lists which orders of a voucher a queue still holds: queued,
// or delivered and not yet acknowledged.
// With the database's rows they are every order a sale accepted, which is
// what rebuilding a sale's Redis state after a loss needs. A queue that
// holds orders only in process memory, or not at all, declares none
// (Capabilities.Lister).
type OrderHolder interface {
	HeldOrders(ctx context.Context, voucherID int64) ([]Order, error)
}

// HoldingProbe tells whether a queue that cannot list the orders it holds
// (no Lister) holds any at all (Capabilities.Holding): RabbitMQ, whose
// queue outlives the live store. After the live store lost its state a
// rebuild cannot count such a queue's orders, so the first rebuild of the
// new incarnation waits until the queue holds none: the database then has
// every order reserved before the loss, and the live store's buyers every
// one after.
type HoldingProbe interface {
	// Holding returns "" when the queue holds no order now — none queued,
	// none delivered to a consumer of any process and not yet
	// acknowledged, none being forwarded to it — and otherwise what it
	// still holds, for logs. An error: it could not tell.
	Holding(ctx context.Context) (string, error)
}

// DeadLetterSource is one place a queue keeps dead letters (a Redis stream,
// a broker's stream, topic or queue, a process's list), read back in the
// order they were written (Capabilities.DeadLetters; every built-in queue
// has at least one). The records are DeadLetter, the same for every
// backend; the operator's register collects them from each source.
type DeadLetterSource struct {
	// Name is the place's name, the same in every process and across
	// restarts for one that outlives a process: the register keeps how far
	// it has read under it.
	Name   string
	Reader DeadLetterReader
}

// DeadLetterReader reads a source's dead letters from a position on.
type DeadLetterReader interface {
	// DeadLettersAfter returns up to max records written after the one
	// at position after ("" from the first), oldest first, each with its
	// Position.
	DeadLettersAfter(ctx context.Context, after string, max int64) ([]DeadLetter, error)
}

// ReadDeadLetters reads up to max records from each source, from the
// first, oldest first over all of them (the first max).
func ReadDeadLetters(ctx context.Context, sources []DeadLetterSource, max int64) ([]DeadLetter, error) {
	var all []DeadLetter
	for _, s := range sources {
		ds, err := s.Reader.DeadLettersAfter(ctx, "", max)
		if err != nil {
			return nil, fmt.Errorf("dead letters of %s: %w", s.Name, err)
		}
		all = append(all, ds...)
	}
	slices.SortStableFunc(all, func(a, b DeadLetter) int { return a.At.Compare(b.At) })
	if int64(len(all)) > max {
		all = all[:max]
	}
	return all, nil
}
