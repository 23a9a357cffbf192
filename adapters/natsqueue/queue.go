// Package natsqueue is the NATS JetStream backend (SECKILL_QUEUE=nats): an
// outside broker, fed by the relay from the reservation's outbox
// (relay.New). The relay publishes each order to the subject
// <stream>.<voucher id> with its order id as Nats-Msg-Id (JetStream drops a
// repeat inside the stream's duplicate window) and waits for the publish
// ack; consumers pull from one durable consumer, ack after the database
// commit, and keep what they hold from redelivery with InProgress.
package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill-lab/seckill/adapters/internal/brokerevent"
	"github.com/seckill-lab/seckill/adapters/internal/consumername"
	"github.com/seckill-lab/seckill/core"
)

// Name is the SECKILL_QUEUE value of this backend.
const Name = "nats"

// DefaultURL is where the backend looks for NATS unless told otherwise.
const DefaultURL = "nats://127.0.0.1:4222"

// Config configures the queue. Zero values take the defaults.
type Config struct {
	// URL of the NATS server. Default DefaultURL.
	URL string
	// Stream is the JetStream stream of the orders, and its subjects'
	// first token: an order of voucher 42 is published to Stream+".42", so
	// the orders of one voucher can be listed (HeldOrders). Default
	// "seckill_orders".
	Stream string
	// DeadStream holds the dead letters, on subject DeadStream+".dead".
	// Default Stream+"_dead".
	DeadStream string
	// Durable is the durable pull consumer every process shares. Default
	// "seckill-persisters".
	Durable string
	// AckWait: a delivery not acked (nor kept InProgress) this long is
	// delivered again, to any process: how soon a killed process's orders
	// move. Default 30s.
	AckWait time.Duration
	// MaxAckPending bounds the deliveries out and unacked, over every
	// process; at least twice a batch per consumer (the pipeline fetches
	// batch N+1 before acking N). Default 20000.
	MaxAckPending int
	// MaxAge: orders older than this leave the stream (limits retention:
	// the stream keeps acked orders too, for outside consumers and
	// replays). Default 7 days.
	MaxAge time.Duration
	// Duplicates is the window in which a republished order id is
	// dropped. Default 2m.
	Duplicates time.Duration
	// Block is how long one Fetch waits for orders. Default 1s.
	Block time.Duration
	// ConsumerPrefix names this process's consumers in dead letters.
	ConsumerPrefix string
	// Replicas of the streams; 1 on a single server. Default 1.
	Replicas int
	// Signer signs each order published (brokerevent.SignatureHeader); the
	// pipeline checks it. Nil: unsigned.
	Signer *core.OrderSigner
	// Credentials is a NATS credentials file (a user JWT and its nkey
	// seed) to connect with; empty: none, or what the URL carries
	// (nats://user:password@host, nats://token@host).
	Credentials string
}

// StreamName is the stream of a deployment whose keys start with
// keyPrefix (SECKILL_KEY_PREFIX): "seckill:" gives "seckill_orders".
func StreamName(keyPrefix string) string { return brokerevent.Name(keyPrefix, "orders") }

func (c *Config) setDefaults() {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Stream == "" {
		c.Stream = "seckill_orders"
	}
	if c.DeadStream == "" {
		c.DeadStream = c.Stream + "_dead"
	}
	if c.Durable == "" {
		c.Durable = "seckill-persisters"
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 20000
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 7 * 24 * time.Hour
	}
	if c.Duplicates <= 0 {
		c.Duplicates = 2 * time.Minute
	}
	if c.Block <= 0 {
		c.Block = time.Second
	}
	if c.ConsumerPrefix == "" {
		c.ConsumerPrefix = consumername.Default()
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
}

// Queue is the JetStream backend; it implements core.Queue and declares a
// core.Forwarder, so the server relays the outbox to it.
type Queue struct {
	cfg  Config
	log  *slog.Logger
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
	// onClose runs after the connection closed (an embedded server's stop).
	onClose func()

	mu   sync.Mutex
	held map[string]jetstream.Msg // fetched by this process, not yet acked
}

// New connects, creates the streams and the durable consumer if missing
// (or updates them to this configuration), and returns the queue. An
// unreachable server is an error at once.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Queue, error) {
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{nats.Name("seckill " + cfg.ConsumerPrefix),
		nats.Timeout(5 * time.Second), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(false)}
	if cfg.Credentials != "" {
		opts = append(opts, nats.UserCredentials(cfg.Credentials))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		// Not the URL: it may carry a password (the caller names the
		// setting, redacted).
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	q := &Queue{cfg: cfg, log: log, nc: nc, held: map[string]jetstream.Msg{}}
	if err := q.setUp(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return q, nil
}

func (q *Queue) setUp(ctx context.Context) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	js, err := jetstream.New(q.nc)
	if err != nil {
		return fmt.Errorf("nats: jetstream: %w", err)
	}
	q.js = js
	// Limits retention, not work-queue: an order stays after its ack, so
	// outside consumers have their own durable consumers on the stream and
	// a replay can read it again.
	if err := createStream(ctx, js, jetstream.StreamConfig{
		Name: q.cfg.Stream, Subjects: []string{q.cfg.Stream + ".*"},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, Replicas: q.cfg.Replicas,
		MaxAge: q.cfg.MaxAge, Duplicates: q.cfg.Duplicates, Discard: jetstream.DiscardOld,
	}); err != nil {
		return err
	}
	if err := createStream(ctx, js, jetstream.StreamConfig{
		Name: q.cfg.DeadStream, Subjects: []string{q.deadSubject()},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, Replicas: q.cfg.Replicas,
	}); err != nil {
		return err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, q.cfg.Stream, jetstream.ConsumerConfig{
		Durable: q.cfg.Durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: q.cfg.AckWait,
		// Redelivery is bounded by the pipeline (SECKILL_MAX_DELIVERIES →
		// the dead-letter subject), which must see every attempt: a
		// server-side limit would stop delivering silently.
		MaxDeliver: -1, MaxAckPending: q.cfg.MaxAckPending, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("nats: create consumer %s on %s: %w", q.cfg.Durable, q.cfg.Stream, err)
	}
	q.cons = cons
	return nil
}

// streamStoreFailed is JetStream's "error creating store for stream".
const streamStoreFailed jetstream.ErrorCode = 10049

// createStream creates or updates a stream, again after a failure to
// create its store: the server removes an account's empty streams
// directory in the background once its last stream is deleted, and a
// stream created meanwhile finds its parent directory gone ("could not
// create storage directory … no such file or directory", seen in the
// server's log when a test's cleanup deleted its streams while another
// created some: TestConformance failed once in two runs on a busy
// machine). The directory is made again on the next try.
func createStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	var err error
	for try := range 5 {
		if _, err = js.CreateOrUpdateStream(ctx, cfg); err == nil {
			return nil
		}
		var api *jetstream.APIError
		if !errors.As(err, &api) || api.ErrorCode != streamStoreFailed {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nats: create stream %s: %w", cfg.Name, err)
		case <-time.After(time.Duration(try+1) * 50 * time.Millisecond):
		}
	}
	return fmt.Errorf("nats: create stream %s: %w", cfg.Name, err)
}

func (q *Queue) subject(voucherID int64) string {
	return q.cfg.Stream + "." + strconv.FormatInt(voucherID, 10)
}

func (q *Queue) deadSubject() string { return q.cfg.DeadStream + ".dead" }

// Config returns the effective configuration.
func (q *Queue) Config() Config { return q.cfg }

// Capabilities: a broker, fed by a relay (Forwarder); the durable consumer
// keeps each delivery until it is acked, and any process may take it.
func (q *Queue) Capabilities() core.Capabilities {
	return core.Capabilities{
		Name: Name,
		Guarantees: core.Guarantees{
			DurableAcrossConsumerCrash: true,
			Acknowledged:               true,
			Replayable:                 true,
			CompetingConsumers:         true,
			RetainsWithoutConsumer:     true,
			CountsDeliveries:           true, // JetStream's NumDelivered
		},
		Forwarder: q, Stats: q, Lister: q,
		DeadLetters: []core.DeadLetterSource{{Name: "nats:" + q.cfg.DeadStream, Reader: q}},
		Duties:      []core.Duty{{Name: "keep-held", Every: q.cfg.AckWait / 3, Do: q.keepHeld}},
	}
}

// Forward publishes the orders asynchronously, each with its order id as
// Nats-Msg-Id, and returns once JetStream acked every one (stored; a
// duplicate inside the window is acked as such and stored once).
func (q *Queue) Forward(ctx context.Context, orders []core.Order) error {
	futures := make([]jetstream.PubAckFuture, 0, len(orders))
	for _, o := range orders {
		m := nats.NewMsg(q.subject(o.VoucherID))
		body, headers := brokerevent.Event(o, q.cfg.Signer)
		m.Data = body
		for k, v := range headers {
			m.Header.Set(k, v)
		}
		f, err := q.js.PublishMsgAsync(m, jetstream.WithMsgID(strconv.FormatInt(o.ID, 10)),
			jetstream.WithExpectStream(q.cfg.Stream))
		if err != nil {
			return fmt.Errorf("nats: publish order %d: %w", o.ID, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("nats: publish not acked: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Consumer returns a consumer of the durable consumer.
func (q *Queue) Consumer(_ context.Context, index int) (core.Consumer, error) {
	return &consumer{q: q, name: consumername.Of(q.cfg.ConsumerPrefix, index)}, nil
}

// Close closes the connection; deliveries not acked come back after
// AckWait, to whichever process fetches then.
func (q *Queue) Close() error {
	q.nc.Close()
	if q.onClose != nil {
		q.onClose()
	}
	return nil
}

// keepHeld tells JetStream the deliveries this process holds are still
// being worked on (InProgress resets their AckWait), so a batch a slow
// database holds is not delivered to a sibling meanwhile.
func (q *Queue) keepHeld(context.Context) error {
	q.mu.Lock()
	msgs := make([]jetstream.Msg, 0, len(q.held))
	for _, m := range q.held {
		msgs = append(msgs, m)
	}
	q.mu.Unlock()
	var errs []error
	for _, m := range msgs {
		if err := m.InProgress(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

type consumer struct {
	q      *Queue
	name   string
	closed atomic.Bool
}

// Fetch pulls up to max deliveries: what the consumer has now, at once;
// when it has nothing, it waits up to Block for the first and then takes
// what came with it. (A pull of max that waits would wait the whole Block
// whenever fewer than max are there.) JetStream does not deliver what this
// process holds unacked again before AckWait, and keepHeld renews that
// while it holds them.
func (c *consumer) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	if c.closed.Load() {
		return nil, errors.New("nats: consumer closed")
	}
	batch, err := c.q.cons.FetchNoWait(max)
	if err != nil {
		return nil, fmt.Errorf("nats: fetch: %w", err)
	}
	out, err := c.take(batch)
	if len(out) > 0 || err != nil {
		return out, err
	}
	fctx, cancel := context.WithTimeout(ctx, c.q.cfg.Block)
	defer cancel()
	if batch, err = c.q.cons.Fetch(1, jetstream.FetchContext(fctx)); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("nats: fetch: %w", err)
	}
	if out, err = c.take(batch); len(out) == 0 || err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return out, err
	}
	if max > 1 {
		if batch, err = c.q.cons.FetchNoWait(max - 1); err == nil {
			more, _ := c.take(batch)
			out = append(out, more...)
		}
	}
	return out, nil
}

// take reads a batch's deliveries and holds them.
func (c *consumer) take(batch jetstream.MessageBatch) ([]core.Delivery, error) {
	var out []core.Delivery
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			// Not a JetStream delivery: nothing to ack it against.
			continue
		}
		id := strconv.FormatUint(md.Sequence.Stream, 10)
		c.q.mu.Lock()
		c.q.held[id] = m
		c.q.mu.Unlock()
		out = append(out, core.Delivery{ID: id, Body: m.Data(), Attempt: int(md.NumDelivered),
			Signature: m.Headers().Get(brokerevent.SignatureHeader)})
	}
	if err := batch.Error(); err != nil && len(out) == 0 && !errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.Canceled) && !errors.Is(err, jetstream.ErrNoMessages) {
		return nil, fmt.Errorf("nats: fetch: %w", err)
	}
	return out, nil
}

func (c *consumer) release(id string) jetstream.Msg {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	m := c.q.held[id]
	delete(c.q.held, id)
	return m
}

// Ack acks each delivery and waits until the server has them (a flush):
// an ack that is only sent could be lost with the connection, and the
// order would be stored twice (harmless) instead of once.
func (c *consumer) Ack(ctx context.Context, ds []core.Delivery) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	var errs []error
	for _, d := range ds {
		m := c.release(d.ID)
		if m == nil {
			continue // acked before
		}
		if err := m.Ack(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.q.nc.FlushWithContext(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nats: ack: %w", err)
	}
	return nil
}

// DeadLetter publishes the record to the dead-letter subject (acked by
// JetStream, deduplicated by the delivery's sequence), then terminates the
// delivery: it is never delivered again.
func (c *consumer) DeadLetter(ctx context.Context, d core.Delivery, reason string) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	rec := core.DeadLetterOf(Name, c.name, d, reason)
	m := nats.NewMsg(c.q.deadSubject())
	m.Data = rec.Body
	for k, v := range brokerevent.DeadLetterHeaders(rec, c.q.cfg.Signer) {
		m.Header.Set(k, v)
	}
	if _, err := c.q.js.PublishMsg(ctx, m, jetstream.WithMsgID("dead-"+d.ID)); err != nil {
		return fmt.Errorf("nats: dead-letter %s: %w", d.ID, err)
	}
	msg := c.release(d.ID)
	if msg == nil {
		return nil
	}
	if err := msg.Term(); err != nil {
		return fmt.Errorf("nats: terminate %s: %w", d.ID, err)
	}
	return c.q.nc.FlushWithContext(ctx)
}

// Close stops this consumer; what it holds unacked comes back after
// AckWait.
func (c *consumer) Close() error {
	c.closed.Store(true)
	return nil
}

// Stats: Depth is what the durable consumer has not delivered yet, Pending
// what it delivered and nobody acked; DeadLetters the dead-letter stream's
// size.
func (q *Queue) Stats(ctx context.Context) (core.QueueStats, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	s := core.UnknownStats
	info, err := q.cons.Info(ctx)
	if err != nil {
		return s, fmt.Errorf("nats: consumer info: %w", err)
	}
	s.Depth, s.Pending = int64(info.NumPending), int64(info.NumAckPending)
	dead, err := q.js.Stream(ctx, q.cfg.DeadStream)
	if err != nil {
		return s, fmt.Errorf("nats: dead-letter stream: %w", err)
	}
	dinfo, err := dead.Info(ctx)
	if err != nil {
		return s, fmt.Errorf("nats: dead-letter stream info: %w", err)
	}
	s.DeadLetters = int64(dinfo.State.Msgs)
	return s, nil
}

// HeldOrders lists the voucher's orders above the durable consumer's ack
// floor: not yet delivered, or delivered and not acked (and a few acked
// out of order above the floor, which are in the database: a rebuild
// counts an order once, by id). It reads the voucher's own subject with an
// ordered consumer, so other vouchers' orders are not read.
func (q *Queue) HeldOrders(ctx context.Context, voucherID int64) ([]core.Order, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	info, err := q.cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("nats: held orders: %w", err)
	}
	stream, err := q.js.Stream(ctx, q.cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("nats: held orders: %w", err)
	}
	sinfo, err := stream.Info(ctx, jetstream.WithSubjectFilter(q.subject(voucherID)))
	if err != nil {
		return nil, fmt.Errorf("nats: held orders: %w", err)
	}
	if sinfo.State.LastSeq <= info.AckFloor.Stream || sinfo.State.Subjects[q.subject(voucherID)] == 0 {
		return nil, nil
	}
	oc, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{q.subject(voucherID)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: info.AckFloor.Stream + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("nats: held orders: %w", err)
	}
	var bodies []string
	for {
		batch, err := oc.Fetch(1000, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			return nil, fmt.Errorf("nats: held orders: %w", err)
		}
		n, left := 0, uint64(0)
		for m := range batch.Messages() {
			n++
			bodies = append(bodies, string(m.Data()))
			if md, err := m.Metadata(); err == nil {
				left = md.NumPending
			}
		}
		if n == 0 || left == 0 {
			break
		}
	}
	return core.OrdersOfVoucher(voucherID, bodies), nil
}

// DeadLettersAfter reads the dead-letter stream after the sequence after,
// oldest first; a record's position is its sequence.
func (q *Queue) DeadLettersAfter(ctx context.Context, after string, limit int64) ([]core.DeadLetter, error) {
	var from uint64
	if after != "" {
		n, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("nats: dead-letter position %q: %w", after, err)
		}
		from = n
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	stream, err := q.js.Stream(ctx, q.cfg.DeadStream)
	if err != nil {
		return nil, fmt.Errorf("nats: dead letters: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("nats: dead letters: %w", err)
	}
	var out []core.DeadLetter
	for seq := max(info.State.FirstSeq, from+1); seq <= info.State.LastSeq && int64(len(out)) < limit && info.State.Msgs > 0; seq++ {
		raw, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("nats: dead letter %d: %w", seq, err)
		}
		h := map[string]string{}
		for k := range raw.Header {
			h[k] = raw.Header.Get(k)
		}
		d := brokerevent.DecodeDeadLetter(raw.Data, h, q.cfg.Signer)
		d.Position = strconv.FormatUint(seq, 10)
		out = append(out, d)
	}
	return out, nil
}

// bounded gives ctx a deadline if it has none: nats.go's calls refuse a
// context without one.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, 10*time.Second)
}

var (
	_ core.Queue     = (*Queue)(nil)
	_ core.Forwarder = (*Queue)(nil)
)
