// Package amqpqueue is the RabbitMQ backend (SECKILL_QUEUE=rabbitmq): an
// outside broker, fed by the relay from the reservation's outbox
// (relay.New). The relay publishes each order, persistent and
// mandatory, to a quorum queue on a channel in confirm mode and waits for
// the broker's confirms; consumers take deliveries with manual acks and
// ack after the database commit. A message delivered too often (the
// queue's x-delivery-limit, a backstop behind the pipeline's own limit) is
// dead-lettered by RabbitMQ through a dead-letter exchange, at least once.
package amqpqueue

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-lab/seckill/adapters/internal/brokerevent"
	"github.com/seckill-lab/seckill/adapters/internal/consumername"
	"github.com/seckill-lab/seckill/core"
)

// Name is the SECKILL_QUEUE value of this backend.
const Name = "rabbitmq"

// DefaultURL is where the backend looks for RabbitMQ unless told otherwise.
const DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"

// Config configures the queue. Zero values take the defaults.
type Config struct {
	// URL of the broker. Default DefaultURL.
	URL string
	// Queue is the quorum queue of the orders. Default "seckill_orders".
	Queue string
	// DeadQueue holds the dead letters, reached through the exchange
	// DeadQueue (RabbitMQ's own dead-lettering) or published to directly
	// (the pipeline's). Default Queue+"_dead".
	DeadQueue string
	// Prefetch bounds the deliveries one consumer holds unacked; at least
	// twice a batch (the pipeline fetches batch N+1 before acking N).
	// Default 1000.
	Prefetch int
	// DeliveryLimit is the queue's x-delivery-limit: a message returned
	// this often is dead-lettered by RabbitMQ. The pipeline gives up first
	// (SECKILL_MAX_DELIVERIES); this is the backstop for a message whose
	// consumers die before they can. Default 20.
	DeliveryLimit int
	// Block is how long one Fetch waits for the first delivery. Default 1s.
	Block time.Duration
	// ConsumerPrefix names this process's consumers (their tags, and dead
	// letters).
	ConsumerPrefix string
	// Signer signs each order published (brokerevent.SignatureHeader); the
	// pipeline checks it. Nil: unsigned.
	Signer *core.OrderSigner
}

// QueueName is the queue of a deployment whose keys start with keyPrefix
// (SECKILL_KEY_PREFIX): "seckill:" gives "seckill_orders".
func QueueName(keyPrefix string) string { return brokerevent.Name(keyPrefix, "orders") }

func (c *Config) setDefaults() {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Queue == "" {
		c.Queue = "seckill_orders"
	}
	if c.DeadQueue == "" {
		c.DeadQueue = c.Queue + "_dead"
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 1000
	}
	if c.DeliveryLimit <= 0 {
		c.DeliveryLimit = 20
	}
	if c.Block <= 0 {
		c.Block = time.Second
	}
	if c.ConsumerPrefix == "" {
		c.ConsumerPrefix = consumername.Default()
	}
}

// Queue is the RabbitMQ backend; it implements core.Queue and declares a
// core.Forwarder, so the server relays the outbox to it.
type Queue struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	conn   *amqp.Connection
	closed bool

	// pub is the confirm-mode channel Forward publishes on, one batch at a
	// time (its returns are read per batch).
	pubMu   sync.Mutex
	pub     *amqp.Channel
	returns chan amqp.Return

	// buffered counts deliveries the broker pushed to this process's
	// consumers that they have not fetched yet: still waiting, for Stats.
	buffered atomic.Int64

	roster

	// deadRead is how many messages the dead-letter queue held when a read
	// last reached its end, and the last one's position: the queue only
	// grows (nothing consumes it), so the same count after that position
	// means nothing new, and the register's collector, asking every
	// second, reads the whole queue only when something was added.
	deadMu   sync.Mutex
	deadRead struct {
		count int
		last  string
	}
	forwarding atomic.Int64
	// failing: the last forward was not confirmed; its relay still holds
	// the batch and will forward it again.
	failing atomic.Bool
	// done is closed by Close; answered when the roll-call answerer ended.
	done, answered chan struct{}
}

// roster is what this process answers a roll call with (see Holding):
// its consumers, and moves, which counts every delivery, ack and forward
// so that a roll call sees whether anything moved between two of its
// answers.
type roster struct {
	process    string
	consumerMu sync.Mutex
	consumers  map[*consumer]struct{}
	moves      atomic.Int64
}

// New connects and declares the queues and the dead-letter exchange. An
// unreachable broker is an error at once.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Queue, error) {
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{cfg: cfg, log: log, roster: roster{process: cfg.ConsumerPrefix + "-" + rand.Text()[:8],
		consumers: map[*consumer]struct{}{}}, done: make(chan struct{}), answered: make(chan struct{})}
	if _, err := q.connection(); err != nil {
		return nil, err
	}
	go q.answerRollCalls()
	return q, nil
}

// connection is the live connection, dialled again (and the topology
// declared again) after the broker dropped it: a restarted broker is a
// new connection, not a dead backend.
func (q *Queue) connection() (*amqp.Connection, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, errors.New("rabbitmq: queue closed")
	}
	if q.conn != nil && !q.conn.IsClosed() {
		return q.conn, nil
	}
	conn, err := amqp.DialConfig(q.cfg.URL, amqp.Config{
		Dial: amqp.DefaultDial(5 * time.Second), Heartbeat: 10 * time.Second,
		Properties: amqp.Table{"connection_name": "seckill " + q.cfg.ConsumerPrefix},
	})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: connect: %w", err)
	}
	if err := q.declare(conn); err != nil {
		conn.Close()
		return nil, err
	}
	q.conn = conn
	return conn, nil
}

// declare creates what the queue needs, idempotently: the quorum queue
// (durable, replicated where the cluster has nodes; on one node it has no
// fault tolerance), the dead-letter exchange and queue. At-least-once
// dead-lettering needs x-overflow=reject-publish: a full queue then
// refuses a publish (the relay retries it) rather than drop its oldest.
func (q *Queue) declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: channel: %w", err)
	}
	defer ch.Close()
	quorum := amqp.Table{"x-queue-type": "quorum"}
	if _, err := ch.QueueDeclare(q.cfg.DeadQueue, true, false, false, false, quorum); err != nil {
		return fmt.Errorf("rabbitmq: declare %s: %w", q.cfg.DeadQueue, err)
	}
	if err := ch.ExchangeDeclare(q.cfg.DeadQueue, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: declare exchange %s: %w", q.cfg.DeadQueue, err)
	}
	if err := ch.QueueBind(q.cfg.DeadQueue, "", q.cfg.DeadQueue, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: bind %s: %w", q.cfg.DeadQueue, err)
	}
	if err := ch.ExchangeDeclare(q.rollCallExchange(), amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: declare exchange %s: %w", q.rollCallExchange(), err)
	}
	if _, err := ch.QueueDeclare(q.cfg.Queue, true, false, false, false, amqp.Table{
		"x-queue-type":           "quorum",
		"x-delivery-limit":       q.cfg.DeliveryLimit,
		"x-dead-letter-exchange": q.cfg.DeadQueue,
		"x-dead-letter-strategy": "at-least-once",
		"x-overflow":             "reject-publish",
	}); err != nil {
		return fmt.Errorf("rabbitmq: declare %s: %w", q.cfg.Queue, err)
	}
	return nil
}

// Config returns the effective configuration.
func (q *Queue) Config() Config { return q.cfg }

// Capabilities: a broker, fed by a relay (Forwarder). RabbitMQ cannot list
// a queue's messages, so the queue lists no held orders (Lister nil); it
// tells whether it holds any (Holding), so the first rebuild after Redis's
// loss waits until it holds none (see docs/architecture.md).
func (q *Queue) Capabilities() core.Capabilities {
	return core.Capabilities{
		Name: Name,
		Guarantees: core.Guarantees{
			DurableAcrossConsumerCrash: true,
			Acknowledged:               true,
			Replayable:                 false,
			CompetingConsumers:         true,
			RetainsWithoutConsumer:     true,
			CountsDeliveries:           true, // the quorum queue's x-delivery-count
		},
		Forwarder: q, Stats: q, Holding: q,
		DeadLetters: []core.DeadLetterSource{{Name: "rabbitmq:" + q.cfg.DeadQueue, Reader: q}},
	}
}

// publisher is the confirm-mode channel, opened again after it closed.
// Called with pubMu held.
func (q *Queue) publisher() (*amqp.Channel, error) {
	if q.pub != nil && !q.pub.IsClosed() {
		return q.pub, nil
	}
	conn, err := q.connection()
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("rabbitmq: confirm mode: %w", err)
	}
	q.pub, q.returns = ch, ch.NotifyReturn(make(chan amqp.Return, 1024))
	return ch, nil
}

// Forward publishes the orders (persistent, mandatory, the order id as
// message id) and returns once the broker confirmed each: a nack (the
// queue refused it) or a return (no queue took it) is an error, and the
// relay forwards the batch again. RabbitMQ has no dedup: a repeat is
// absorbed by the store's idempotence (and outside consumers dedup by the
// order id).
func (q *Queue) Forward(ctx context.Context, orders []core.Order) (err error) {
	q.forwarding.Add(1)
	q.moves.Add(1)
	defer func() {
		q.failing.Store(err != nil)
		q.forwarding.Add(-1)
		q.moves.Add(1)
	}()
	q.pubMu.Lock()
	defer q.pubMu.Unlock()
	ch, err := q.publisher()
	if err != nil {
		return err
	}
	confirms := make([]*amqp.DeferredConfirmation, 0, len(orders))
	for _, o := range orders {
		body, event := brokerevent.Event(o, q.cfg.Signer)
		headers := amqp.Table{}
		for k, v := range event {
			headers[k] = v
		}
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.cfg.Queue, true, false, amqp.Publishing{
			Headers: headers, ContentType: "application/json", DeliveryMode: amqp.Persistent,
			MessageId: strconv.FormatInt(o.ID, 10), Timestamp: o.CreatedAt, Body: body,
		})
		if err != nil {
			return fmt.Errorf("rabbitmq: publish order %d: %w", o.ID, err)
		}
		confirms = append(confirms, c)
	}
	for _, c := range confirms {
		acked, err := c.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("rabbitmq: confirm: %w", err)
		}
		if !acked {
			return errors.New("rabbitmq: the broker refused a publish (nack)")
		}
	}
	// A return comes before the confirm of its message.
	select {
	case r := <-q.returns:
		return fmt.Errorf("rabbitmq: order %s returned unroutable: %s", r.MessageId, r.ReplyText)
	default:
	}
	return nil
}

// Consumer returns a consumer on a channel of its own.
func (q *Queue) Consumer(_ context.Context, index int) (core.Consumer, error) {
	c := &consumer{q: q, name: consumername.Of(q.cfg.ConsumerPrefix, index)}
	q.consumerMu.Lock()
	q.consumers[c] = struct{}{}
	q.consumerMu.Unlock()
	return c, nil
}

// Close closes the connection: deliveries not acked go back to the queue
// at once, for any consumer.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.done)
	var err error
	if q.conn != nil {
		err = q.conn.Close()
	}
	q.mu.Unlock()
	<-q.answered
	return err
}

type consumer struct {
	q    *Queue
	name string

	mu sync.Mutex
	ch *amqp.Channel
	// buf holds what the broker pushed to the channel (up to Prefetch)
	// and Fetch has not taken yet; arrived is signalled when it grows,
	// and gone closed when the channel's deliveries end.
	buf     []amqp.Delivery
	arrived chan struct{}
	gone    chan struct{}
	closed  atomic.Bool
	// tag is the channel's consumer tag, and unacked counts what the
	// broker delivered on the channel and the consumer has not acked (in
	// buf or fetched), for the roll call.
	tag     string
	unacked int64
}

// channel is the consumer's channel, opened (and consuming) again after it
// closed. What the old one held went back to the queue with it.
func (c *consumer) channel() (*amqp.Channel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil && !c.ch.IsClosed() {
		return c.ch, nil
	}
	c.q.buffered.Add(-int64(len(c.buf)))
	c.buf, c.tag, c.unacked = nil, "", 0
	conn, err := c.q.connection()
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: channel: %w", err)
	}
	if err := ch.Qos(c.q.cfg.Prefetch, 0, false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("rabbitmq: qos: %w", err)
	}
	tag := c.name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ds, err := ch.Consume(c.q.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("rabbitmq: consume %s: %w", c.q.cfg.Queue, err)
	}
	c.ch, c.arrived, c.gone, c.tag = ch, make(chan struct{}, 1), make(chan struct{}), tag
	go c.pump(ch, ds, c.arrived, c.gone)
	return ch, nil
}

// pump moves what the broker pushes into buf, so Fetch takes whatever is
// there at once and Stats can count it as waiting.
func (c *consumer) pump(ch *amqp.Channel, ds <-chan amqp.Delivery, arrived, gone chan struct{}) {
	defer close(gone)
	for d := range ds {
		c.mu.Lock()
		if c.ch == ch {
			c.buf = append(c.buf, d)
			c.unacked++
			c.q.buffered.Add(1)
			c.q.moves.Add(1)
		}
		c.mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
	}
}

// take removes up to max deliveries of ch from buf.
func (c *consumer) take(ch *amqp.Channel, max int) []core.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != ch {
		return nil
	}
	n := min(max, len(c.buf))
	out := make([]core.Delivery, n)
	for i, d := range c.buf[:n] {
		out[i] = delivery(ch, d)
	}
	c.buf = c.buf[n:]
	c.q.buffered.Add(-int64(n))
	return out
}

// Fetch takes what the broker has pushed, up to max; when nothing is
// here, it waits up to Block for the first, and a moment (gather) for the
// ones that come with it. RabbitMQ does not deliver what a channel holds
// unacked to anyone else while the channel lives.
func (c *consumer) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	if c.closed.Load() {
		return nil, errors.New("rabbitmq: consumer closed")
	}
	ch, err := c.channel()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	arrived, gone := c.arrived, c.gone
	c.mu.Unlock()
	out := c.take(ch, max)
	if len(out) > 0 {
		return out, nil
	}
	timer := time.NewTimer(c.q.cfg.Block)
	defer timer.Stop()
	for len(out) == 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, nil
		case <-gone:
			return nil, errors.New("rabbitmq: the consumer's channel closed; consuming again")
		case <-arrived:
			out = c.take(ch, max)
		}
	}
	if len(out) < max {
		// The rest of a batch the relay published together arrives within
		// microseconds of its first message.
		timer.Reset(gather)
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		out = append(out, c.take(ch, max-len(out))...)
	}
	return out, nil
}

// gather is how long Fetch waits, after the first delivery, for the ones
// pushed with it.
const gather = 2 * time.Millisecond

// delivery names a delivery by its channel and tag: a tag means nothing
// on another channel (one opened after a reconnect).
func delivery(ch *amqp.Channel, d amqp.Delivery) core.Delivery {
	attempt := 1
	// Quorum queues count earlier deliveries in x-delivery-count.
	switch n := d.Headers["x-delivery-count"].(type) {
	case int64:
		attempt += int(n)
	case int32:
		attempt += int(n)
	case int:
		attempt += n
	}
	if attempt == 1 && d.Redelivered {
		attempt = 2
	}
	signature, _ := d.Headers[brokerevent.SignatureHeader].(string)
	return core.Delivery{ID: channelID(ch) + ":" + strconv.FormatUint(d.DeliveryTag, 10), Body: d.Body, Attempt: attempt, Signature: signature}
}

// channelID tells channels apart in delivery ids.
func channelID(ch *amqp.Channel) string { return fmt.Sprintf("%p", ch) }

// tagOf is the delivery tag of d if it was delivered on ch.
func tagOf(ch *amqp.Channel, d core.Delivery) (uint64, bool) {
	prefix := channelID(ch) + ":"
	if len(d.ID) <= len(prefix) || d.ID[:len(prefix)] != prefix {
		return 0, false
	}
	tag, err := strconv.ParseUint(d.ID[len(prefix):], 10, 64)
	return tag, err == nil
}

// Ack acks each delivery on its channel. A delivery of a channel that has
// since closed went back to the queue when it closed; it will be delivered
// again and found already stored.
func (c *consumer) Ack(_ context.Context, ds []core.Delivery) error {
	c.mu.Lock()
	ch := c.ch
	c.mu.Unlock()
	if ch == nil {
		return nil
	}
	var errs []error
	acked := int64(0)
	for _, d := range ds {
		tag, ok := tagOf(ch, d)
		if !ok {
			continue
		}
		if err := ch.Ack(tag, false); err != nil {
			errs = append(errs, err)
			continue
		}
		acked++
	}
	c.mu.Lock()
	if c.ch == ch {
		c.unacked -= acked
	}
	c.mu.Unlock()
	c.q.moves.Add(acked)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rabbitmq: ack: %w", err)
	}
	return nil
}

// DeadLetter publishes the record to the dead-letter queue (confirmed),
// then acks the delivery.
func (c *consumer) DeadLetter(ctx context.Context, d core.Delivery, reason string) error {
	rec := core.DeadLetterOf(Name, c.name, d, reason)
	headers := amqp.Table{}
	for k, v := range brokerevent.DeadLetterHeaders(rec, c.q.cfg.Signer) {
		headers[k] = v
	}
	c.q.pubMu.Lock()
	err := func() error {
		ch, err := c.q.publisher()
		if err != nil {
			return err
		}
		conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", c.q.cfg.DeadQueue, true, false, amqp.Publishing{
			Headers: headers, DeliveryMode: amqp.Persistent, Body: rec.Body,
		})
		if err != nil {
			return err
		}
		if acked, err := conf.WaitContext(ctx); err != nil || !acked {
			return fmt.Errorf("not confirmed (%v)", err)
		}
		return nil
	}()
	c.q.pubMu.Unlock()
	if err != nil {
		return fmt.Errorf("rabbitmq: dead-letter %s: %w", d.ID, err)
	}
	return c.Ack(ctx, []core.Delivery{d})
}

// Close cancels the consumer: what it holds unacked goes back to the
// queue.
func (c *consumer) Close() error {
	c.closed.Store(true)
	c.q.consumerMu.Lock()
	delete(c.q.consumers, c)
	c.q.consumerMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.q.buffered.Add(-int64(len(c.buf)))
	c.buf, c.tag, c.unacked = nil, "", 0
	if c.ch != nil {
		ch := c.ch
		c.ch = nil
		return ch.Close()
	}
	return nil
}

// Stats: Depth is the messages ready in the queue and those pushed to
// this process's consumers and not fetched yet (another process's are not
// known here); what consumers hold unacked is not told over AMQP (Pending
// unknown); DeadLetters is the dead-letter queue's ready count.
func (q *Queue) Stats(context.Context) (core.QueueStats, error) {
	s := core.UnknownStats
	states, err := q.inspect(q.cfg.Queue, q.cfg.DeadQueue)
	if err != nil {
		return s, err
	}
	main, dead := states[0], states[1]
	s.Depth, s.DeadLetters = int64(main.Messages)+q.buffered.Load(), int64(dead.Messages)
	return s, nil
}

// inspect reads the named queues' state (ready messages, consumers), each
// one answer of its leader, on a channel of its own.
func (q *Queue) inspect(names ...string) ([]amqp.Queue, error) {
	conn, err := q.connection()
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: channel: %w", err)
	}
	defer ch.Close()
	out := make([]amqp.Queue, len(names))
	for i, name := range names {
		if out[i], err = ch.QueueDeclarePassive(name, true, false, false, false, nil); err != nil {
			return nil, fmt.Errorf("rabbitmq: %s: %w", name, err)
		}
	}
	return out, nil
}

// DeadLettersAfter reads the dead-letter queue without taking anything
// from it: each message is fetched and then returned (nack with requeue) on
// a channel of its own, so the list is the queue's order, oldest first. A
// queue has no offsets: a record's position is a digest of the message,
// and a read after one starts past it, or from the head if the queue no
// longer holds it (the register keeps each record once).
func (q *Queue) DeadLettersAfter(_ context.Context, after string, limit int64) ([]core.DeadLetter, error) {
	conn, err := q.connection()
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: channel: %w", err)
	}
	// Closing the channel returns every message it got, unacked, in order.
	defer ch.Close()
	held, err := ch.QueueDeclarePassive(q.cfg.DeadQueue, true, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %s: %w", q.cfg.DeadQueue, err)
	}
	q.deadMu.Lock()
	unchanged := after != "" && q.deadRead.last == after && q.deadRead.count == held.Messages
	q.deadMu.Unlock()
	if unchanged {
		return nil, nil
	}
	var all []core.DeadLetter
	for {
		m, ok, err := ch.Get(q.cfg.DeadQueue, false)
		if err != nil {
			return nil, fmt.Errorf("rabbitmq: read %s: %w", q.cfg.DeadQueue, err)
		}
		if !ok {
			break
		}
		h := map[string]string{}
		for k, v := range m.Headers {
			if s, ok := v.(string); ok {
				h[k] = s
			}
		}
		if _, ok := h["reason"]; !ok {
			// Dead-lettered by RabbitMQ itself (x-delivery-limit): its
			// x-death header says why, and the message keeps the headers
			// it was published with, the body's signature among them.
			h["reason"] = "max_deliveries: rabbitmq's x-delivery-limit"
			h["queue"] = Name
		}
		position := digest(m.Body, h, m.MessageId)
		if _, ok := h["signature"]; !ok {
			h["signature"] = h[brokerevent.SignatureHeader]
		}
		d := brokerevent.DecodeDeadLetter(m.Body, h, q.cfg.Signer)
		d.Position = position
		all = append(all, d)
	}
	from := 0
	if i := slices.IndexFunc(all, func(d core.DeadLetter) bool { return d.Position == after }); i >= 0 {
		from = i + 1
	}
	out := all[from:min(int64(from)+limit, int64(len(all)))]
	if len(out) > 0 && out[len(out)-1].Position == all[len(all)-1].Position {
		q.deadMu.Lock()
		q.deadRead.count, q.deadRead.last = len(all), out[len(out)-1].Position
		q.deadMu.Unlock()
	}
	return out, nil
}

// digest names a dead message by its body, headers and id.
func digest(body []byte, headers map[string]string, id string) string {
	h := sha256.New()
	h.Write(body)
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		fmt.Fprintf(h, "\x00%s=%s", k, headers[k])
	}
	fmt.Fprintf(h, "\x00%s", id)
	return hex.EncodeToString(h.Sum(nil)[:12])
}

var (
	_ core.Queue        = (*Queue)(nil)
	_ core.Forwarder    = (*Queue)(nil)
	_ core.HoldingProbe = (*Queue)(nil)
)
