// Package kafkaqueue is the Kafka backend (SECKILL_QUEUE=kafka): an
// outside broker, fed by the relay from the reservation's outbox
// (relay.New), with franz-go. The relay produces each order, keyed by
// its voucher (so a voucher's orders share a partition), with acks=all and
// the idempotent producer, and waits for the acks; consumers are members
// of one consumer group and commit a partition's offset only past orders
// the database committed. A poison order goes to a dead-letter topic, so
// it does not block its partition.
package kafkaqueue

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"go.opentelemetry.io/otel/propagation"

	"github.com/seckill-lab/seckill/adapters/internal/brokerevent"
	"github.com/seckill-lab/seckill/adapters/internal/consumername"
	"github.com/seckill-lab/seckill/core"
)

// Name is the SECKILL_QUEUE value of this backend.
const Name = "kafka"

// Config configures the queue. Zero values take the defaults, but for
// Brokers.
type Config struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// Topic of the orders. Default "seckill_orders".
	Topic string
	// DeadTopic holds the dead letters. Default Topic+"_dead".
	DeadTopic string
	// Group is the consumer group of the persisters. Default: the
	// topic's name with "_persisters" ("seckill_orders_persisters"): a
	// group is the Kafka cluster's, so deployments sharing one cluster
	// (each its own topic, from its key prefix) must not share it, or
	// each one's members would rebalance the others'.
	Group string
	// Partitions of the topics, when this creates them. Default 12.
	Partitions int32
	// Replication of the topics, when this creates them: -1 is the
	// brokers' default. Default -1.
	Replication int16
	// SessionTimeout: a member silent this long is out of the group and
	// its partitions go to the others, with what it held uncommitted:
	// how soon a killed process's orders move. Default 10s.
	SessionTimeout time.Duration
	// Block is how long one Fetch waits. Default 1s.
	Block time.Duration
	// ConsumerPrefix names this process's consumers (their group
	// instance ids are not set: a restart joins as a new member).
	ConsumerPrefix string
	// Signer signs each order produced (brokerevent.SignatureHeader); the
	// pipeline checks it. Nil: unsigned.
	Signer *core.OrderSigner
	// TLS, if set, is every connection's TLS configuration (a zero
	// tls.Config verifies the brokers against the system's roots).
	TLS *tls.Config
	// SASL, if set, authenticates every connection (plain.Auth{…}.AsMechanism(),
	// scram.Auth{…}.AsSha256Mechanism(), …). Nil: none.
	SASL sasl.Mechanism
	// Hooks are added to every client of the queue (franz-go's kotel
	// tracing, say). Nil: none.
	Hooks []kgo.Hook

	// adoptLegacy: Group was defaulted, so New adopts the offsets the
	// legacy group committed on the topic (adoptLegacyOffsets).
	adoptLegacy bool
}

// connection is a client's options: the seed brokers, TLS and SASL, then
// the client's own.
func (c *Config) connection(opts ...kgo.Opt) []kgo.Opt {
	out := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.TLS != nil {
		out = append(out, kgo.DialTLSConfig(c.TLS.Clone()))
	}
	if c.SASL != nil {
		out = append(out, kgo.SASL(c.SASL))
	}
	if len(c.Hooks) > 0 {
		out = append(out, kgo.WithHooks(c.Hooks...))
	}
	return append(out, opts...)
}

// recordHeader is the value of a record's header (the first of the name;
// "" if none).
func recordHeader(r *kgo.Record, name string) string {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}

// legacyGroup is the group every deployment's persisters joined before the
// group was named after the topic.
const legacyGroup = "seckill-persisters"

// TopicName is the topic of a deployment whose keys start with keyPrefix
// (SECKILL_KEY_PREFIX): "seckill:" gives "seckill_orders".
func TopicName(keyPrefix string) string { return brokerevent.Name(keyPrefix, "orders") }

func (c *Config) setDefaults() {
	if c.Topic == "" {
		c.Topic = "seckill_orders"
	}
	if c.DeadTopic == "" {
		c.DeadTopic = c.Topic + "_dead"
	}
	if c.Group == "" {
		c.Group = c.Topic + "_persisters"
		c.adoptLegacy = true
	}
	if c.Partitions <= 0 {
		c.Partitions = 12
	}
	if c.Replication == 0 {
		c.Replication = -1
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.Block <= 0 {
		c.Block = time.Second
	}
	if c.ConsumerPrefix == "" {
		c.ConsumerPrefix = consumername.Default()
	}
}

// Queue is the Kafka backend; it implements core.Queue and declares a
// core.Forwarder, so the server relays the outbox to it.
type Queue struct {
	cfg Config
	log *slog.Logger
	// producer produces the orders (acks=all, idempotent) and the dead
	// letters; admin reads offsets for stats and held orders.
	producer *kgo.Client
	admin    *kadm.Client

	mu        sync.Mutex
	consumers []*consumer
}

// New connects, creates the topics if missing (brokers that do not
// create topics on first use, kfake among them, need it), and returns the
// queue. Unreachable brokers are an error at once.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Queue, error) {
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers")
	}
	producer, err := kgo.NewClient(cfg.connection(kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.ClientID("seckill-"+cfg.ConsumerPrefix), kgo.WithLogger(clientLog{log}))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: client: %w", err)
	}
	q := &Queue{cfg: cfg, log: log, producer: producer, admin: kadm.NewClient(producer)}
	if err := q.createTopics(ctx); err != nil {
		producer.Close()
		return nil, err
	}
	if cfg.adoptLegacy {
		if err := q.adoptLegacyOffsets(ctx); err != nil {
			producer.Close()
			return nil, err
		}
	}
	return q, nil
}

// adoptLegacyOffsets carries a deployment over from the legacy group: when
// the topic's group has committed nothing and legacyGroup has, on this
// topic, its offsets are committed for the group, so the first start under
// the new name resumes where the old one stopped instead of delivering the
// whole topic again. Done once (the group has offsets afterwards); a group
// that already has members refuses the commit, and it is skipped: another
// process started it, adopting first.
func (q *Queue) adoptLegacyOffsets(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	mine, err := q.committed(ctx)
	if err != nil || len(mine) > 0 {
		return err
	}
	legacy, err := q.admin.FetchOffsets(ctx, legacyGroup)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kafka: committed offsets of %s: %w", legacyGroup, err)
	}
	offsets := legacy.Offsets()
	offsets.KeepFunc(func(o kadm.Offset) bool { return o.Topic == q.cfg.Topic && o.At >= 0 })
	if len(offsets) == 0 {
		return nil
	}
	resp, err := q.admin.CommitOffsets(ctx, q.cfg.Group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		q.log.Warn("kafka: the legacy group's offsets were not adopted", "group", q.cfg.Group, "legacy", legacyGroup, "err", err)
		return nil
	}
	q.log.Info("kafka: adopted the legacy group's committed offsets", "group", q.cfg.Group, "legacy", legacyGroup, "topic", q.cfg.Topic)
	return nil
}

func (q *Queue) createTopics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, topic := range []string{q.cfg.Topic, q.cfg.DeadTopic} {
		_, err := q.admin.CreateTopic(ctx, q.cfg.Partitions, q.cfg.Replication, nil, topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafka: create topic %s: %w", topic, err)
		}
	}
	return nil
}

// Config returns the effective configuration.
func (q *Queue) Config() Config { return q.cfg }

// Capabilities: a broker, fed by a relay (Forwarder); an order is owed
// until its partition's committed offset passes it, and a topic keeps what
// was consumed (a new group reads it again).
func (q *Queue) Capabilities() core.Capabilities {
	return core.Capabilities{
		Name: Name,
		Guarantees: core.Guarantees{
			DurableAcrossConsumerCrash: true,
			Acknowledged:               true,
			Replayable:                 true,
			CompetingConsumers:         true,
			RetainsWithoutConsumer:     true,
		},
		Forwarder: q, Stats: q, Lister: q,
		DeadLetters: []core.DeadLetterSource{{Name: "kafka:" + q.cfg.DeadTopic, Reader: q}},
	}
}

// Forward produces the orders, keyed by voucher, and returns once every
// one is acked by all in-sync replicas. The idempotent producer drops its
// own retries; a batch the relay forwards again after a crash is a new
// produce, absorbed by the store's idempotence (and outside consumers
// dedup by the order id).
func (q *Queue) Forward(ctx context.Context, orders []core.Order) error {
	records := make([]*kgo.Record, len(orders))
	for i, o := range orders {
		body, headers := brokerevent.Event(o, q.cfg.Signer)
		r := &kgo.Record{Topic: q.cfg.Topic, Key: []byte(strconv.FormatInt(o.VoucherID, 10)), Value: body, Context: ctx}
		for k, v := range headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		if o.Trace != "" {
			// Each record in its own order's trace: a tracing hook
			// (Hooks) starts its publish span there, not in the batch's.
			r.Context = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{brokerevent.TraceHeader: o.Trace})
		}
		records[i] = r
	}
	if err := q.producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return fmt.Errorf("kafka: produce: %w", err)
	}
	return nil
}

// Consumer returns a member of the group, a client of its own.
func (q *Queue) Consumer(_ context.Context, index int) (core.Consumer, error) {
	c := &consumer{q: q, name: consumername.Of(q.cfg.ConsumerPrefix, index),
		owned: map[int32]bool{}, held: map[int32][]int64{}, next: map[int32]int64{}, acked: make(chan struct{})}
	cl, err := kgo.NewClient(q.cfg.connection(kgo.ClientID("seckill-"+c.name),
		kgo.ConsumerGroup(q.cfg.Group), kgo.ConsumeTopics(q.cfg.Topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(q.cfg.SessionTimeout),
		kgo.FetchMaxWait(q.cfg.Block), kgo.WithLogger(clientLog{q.log.With("consumer", c.name)}),
		// A partition is delivered from only while this member owns it;
		// what it acked is committed before the partition goes, and what
		// it still holds then is delivered to the next owner (and found
		// stored).
		kgo.OnPartitionsAssigned(c.assigned), kgo.OnPartitionsRevoked(c.revoked), kgo.OnPartitionsLost(c.lost))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: consumer: %w", err)
	}
	c.cl = cl
	q.mu.Lock()
	q.consumers = append(q.consumers, c)
	q.mu.Unlock()
	return c, nil
}

// Close closes the producer and every consumer still open.
func (q *Queue) Close() error {
	q.mu.Lock()
	cs := q.consumers
	q.consumers = nil
	q.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	q.producer.Close()
	return nil
}

// heldCount is what this process's consumers hold: fetched, not acked.
func (q *Queue) heldCount() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var n int64
	for _, c := range q.consumers {
		n += c.heldCount()
	}
	return n
}

type consumer struct {
	q    *Queue
	name string
	cl   *kgo.Client

	mu sync.Mutex
	// owned: the partitions the group gives this member now. held: per
	// partition, the offsets fetched and not yet acked, in order; next:
	// per partition, the offset after the last fetched. acked is closed
	// (and replaced) at each ack, for a revocation waiting on one.
	owned  map[int32]bool
	held   map[int32][]int64
	next   map[int32]int64
	acked  chan struct{}
	closed atomic.Bool
	// commits: an ack's commit holds it shared from the moment it reads
	// its offsets until its commit is answered, a revocation exclusively
	// for its own. An ack's commit computed before a revocation and sent
	// after it went to the broker after the revocation's, moving the
	// partition's offset back, and the orders between were delivered again
	// at the next rebalance (the conformance suite's exactly-once check
	// under load, on kfake).
	commits sync.RWMutex
}

func (c *consumer) heldCount() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, offs := range c.held {
		n += int64(len(offs))
	}
	return n
}

// Fetch polls the member's partitions, waiting up to Block. A record this
// member holds (fetched again after its partition came back to it) is
// skipped: the Consumer contract. So is one of a partition revoked since
// the poll returned it: its next owner starts below it (nothing past it
// was committed), and an ack of it here would commit a partition another
// member consumes.
func (c *consumer) Fetch(ctx context.Context, limit int) ([]core.Delivery, error) {
	if c.closed.Load() {
		return nil, errors.New("kafka: consumer closed")
	}
	pctx, cancel := context.WithTimeout(ctx, c.q.cfg.Block)
	defer cancel()
	fetches := c.cl.PollRecords(pctx, limit)
	if fetches.IsClientClosed() {
		return nil, errors.New("kafka: consumer closed")
	}
	var errs []error
	fetches.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []core.Delivery
	fetches.EachRecord(func(r *kgo.Record) {
		if !c.owned[r.Partition] || slices.Contains(c.held[r.Partition], r.Offset) {
			return
		}
		c.held[r.Partition] = append(c.held[r.Partition], r.Offset)
		slices.Sort(c.held[r.Partition])
		c.next[r.Partition] = max(c.next[r.Partition], r.Offset+1)
		out = append(out, core.Delivery{ID: deliveryID(r.Partition, r.Offset), Body: r.Value, Attempt: 1, Signature: recordHeader(r, brokerevent.SignatureHeader)})
	})
	if len(out) == 0 && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, fmt.Errorf("kafka: fetch: %w", errors.Join(errs...))
	}
	return out, nil
}

func deliveryID(partition int32, offset int64) string {
	return strconv.FormatInt(int64(partition), 10) + ":" + strconv.FormatInt(offset, 10)
}

func parseDeliveryID(id string) (int32, int64, bool) {
	for i := range len(id) {
		if id[i] == ':' {
			p, err1 := strconv.ParseInt(id[:i], 10, 32)
			o, err2 := strconv.ParseInt(id[i+1:], 10, 64)
			return int32(p), o, err1 == nil && err2 == nil
		}
	}
	return 0, 0, false
}

// Ack marks the deliveries done and commits, for each partition they are
// of, the offset below which nothing is held any more: a partition's
// offset is one number, so an order acked while an earlier one is still
// held is committed once the earlier one is.
func (c *consumer) Ack(ctx context.Context, ds []core.Delivery) error {
	c.commits.RLock()
	defer c.commits.RUnlock()
	c.mu.Lock()
	touched := map[int32]bool{}
	for _, d := range ds {
		p, o, ok := parseDeliveryID(d.ID)
		if !ok {
			continue
		}
		if i := slices.Index(c.held[p], o); i >= 0 {
			c.held[p] = slices.Delete(c.held[p], i, i+1)
			touched[p] = true
		}
	}
	commit := c.committable(touched)
	if len(touched) > 0 {
		close(c.acked)
		c.acked = make(chan struct{})
	}
	c.mu.Unlock()
	return c.commit(ctx, commit)
}

// committable is, for each partition, the offset to commit: the first
// held, or past the last fetched. Called with mu held.
func (c *consumer) committable(partitions map[int32]bool) map[int32]int64 {
	out := map[int32]int64{}
	for p := range partitions {
		if offs := c.held[p]; len(offs) > 0 {
			out[p] = offs[0]
		} else if n, ok := c.next[p]; ok {
			out[p] = n
		}
	}
	return out
}

func (c *consumer) commit(ctx context.Context, offsets map[int32]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	m := map[string]map[int32]kgo.EpochOffset{c.q.cfg.Topic: {}}
	for p, o := range offsets {
		m[c.q.cfg.Topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var commitErr error
	c.cl.CommitOffsetsSync(ctx, m, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			commitErr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					commitErr = err
				}
			}
		}
	})
	if commitErr != nil {
		return fmt.Errorf("kafka: commit: %w", commitErr)
	}
	return nil
}

// handoffWait bounds how long a revocation waits for the orders this
// member holds on the partitions it gives up to be acked: a batch being
// stored is acked in milliseconds, and then the next owner starts past it
// rather than delivering it again. A slower store hands the rest over
// unacked (delivered again, absorbed by the store's idempotence). The
// group waits for the revocation, up to its rebalance timeout (60 s);
// heartbeats go on meanwhile.
const handoffWait = 5 * time.Second

// assigned: the partitions are this member's from now on.
func (c *consumer) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range assigned[c.q.cfg.Topic] {
		c.owned[p] = true
	}
}

// revoked hands partitions over: nothing more of them is delivered, the
// orders held on them get up to handoffWait to be acked (none when the
// member is closing: its holder has stopped), and what was acked is
// committed; what is still held goes to the next owner.
func (c *consumer) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ps := partitionSet(revoked[c.q.cfg.Topic])
	c.mu.Lock()
	for p := range ps {
		delete(c.owned, p)
	}
	deadline := time.NewTimer(handoffWait)
	defer deadline.Stop()
	for waiting := true; waiting && !c.closed.Load() && c.holdsAny(ps); {
		acked := c.acked
		c.mu.Unlock()
		select {
		case <-acked:
		case <-deadline.C:
			waiting = false
		case <-ctx.Done():
			waiting = false
		}
		c.mu.Lock()
	}
	// The acks' commits under way land first (they take commits before
	// mu, so mu is let go to wait for them); an ack after this finds the
	// partitions forgotten and commits nothing of them.
	c.mu.Unlock()
	c.commits.Lock()
	defer c.commits.Unlock()
	c.mu.Lock()
	commit := c.committable(ps)
	c.forget(ps)
	c.mu.Unlock()
	if err := c.commit(ctx, commit); err != nil {
		c.q.log.Warn("kafka: commit at revocation failed; the next owner gets those orders again", "err", err)
	}
}

// lost: the partitions went without a revocation (the session expired):
// nothing can be committed for them any more.
func (c *consumer) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	ps := partitionSet(lost[c.q.cfg.Topic])
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range ps {
		delete(c.owned, p)
	}
	c.forget(ps)
}

func partitionSet(ps []int32) map[int32]bool {
	out := make(map[int32]bool, len(ps))
	for _, p := range ps {
		out[p] = true
	}
	return out
}

// holdsAny tells whether an order of the partitions is held. Called with
// mu held.
func (c *consumer) holdsAny(ps map[int32]bool) bool {
	for p := range ps {
		if len(c.held[p]) > 0 {
			return true
		}
	}
	return false
}

// forget drops the partitions' bookkeeping. Called with mu held.
func (c *consumer) forget(ps map[int32]bool) {
	for p := range ps {
		delete(c.held, p)
		delete(c.next, p)
	}
}

// DeadLetter produces the record to the dead-letter topic (acked by all
// in-sync replicas), then acks the delivery, so the partition moves on.
func (c *consumer) DeadLetter(ctx context.Context, d core.Delivery, reason string) error {
	rec := core.DeadLetterOf(Name, c.name, d, reason)
	r := &kgo.Record{Topic: c.q.cfg.DeadTopic, Value: rec.Body}
	for k, v := range brokerevent.DeadLetterHeaders(rec, c.q.cfg.Signer) {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	if err := c.q.producer.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("kafka: dead-letter %s: %w", d.ID, err)
	}
	return c.Ack(ctx, []core.Delivery{d})
}

// Close leaves the group: its partitions go to the other members, from
// the committed offsets.
func (c *consumer) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cl.Close()
	return nil
}

// Stats: Depth is the group's lag (end offsets minus committed ones) less
// what this process's consumers hold; Pending is unknown (another
// process's holdings are not told); DeadLetters is the dead-letter topic's
// size.
func (q *Queue) Stats(ctx context.Context) (core.QueueStats, error) {
	s := core.UnknownStats
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lag, err := q.groupLag(ctx)
	if err != nil {
		return s, err
	}
	s.Depth = max(lag-q.heldCount(), 0)
	dead, err := q.topicSize(ctx, q.cfg.DeadTopic)
	if err != nil {
		return s, err
	}
	s.DeadLetters = dead
	return s, nil
}

// committed is the group's committed offset of each partition of the
// topic (0 where none is committed: the group starts at the beginning).
func (q *Queue) committed(ctx context.Context) (map[int32]int64, error) {
	offs, err := q.admin.FetchOffsets(ctx, q.cfg.Group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("kafka: committed offsets: %w", err)
	}
	out := map[int32]int64{}
	for p, o := range offs[q.cfg.Topic] {
		if o.Err == nil && o.At >= 0 {
			out[p] = o.At
		}
	}
	return out, nil
}

func (q *Queue) groupLag(ctx context.Context) (int64, error) {
	committed, err := q.committed(ctx)
	if err != nil {
		return 0, err
	}
	ends, err := q.admin.ListEndOffsets(ctx, q.cfg.Topic)
	if err != nil {
		return 0, fmt.Errorf("kafka: end offsets: %w", err)
	}
	var lag int64
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, o.Err)
			return
		}
		lag += max(o.Offset-committed[o.Partition], 0)
	})
	return lag, errors.Join(errs...)
}

func (q *Queue) topicSize(ctx context.Context, topic string) (int64, error) {
	starts, err := q.admin.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("kafka: start offsets: %w", err)
	}
	ends, err := q.admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("kafka: end offsets: %w", err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(topic, o.Partition); ok && o.Err == nil && s.Err == nil {
			n += o.Offset - s.Offset
		}
	})
	return n, nil
}

// HeldOrders reads the voucher's orders past the group's committed
// offsets: not yet delivered, or delivered and not committed (with, above
// a held one, some already stored: a rebuild counts an order once, by
// id). It reads every partition from its committed offset to its end.
func (q *Queue) HeldOrders(ctx context.Context, voucherID int64) ([]core.Order, error) {
	records, err := q.read(ctx, q.cfg.Topic, true, nil)
	if err != nil {
		return nil, err
	}
	bodies := make([]string, len(records))
	for i, r := range records {
		bodies[i] = string(r.Value)
	}
	return core.OrdersOfVoucher(voucherID, bodies), nil
}

// read returns the records of topic from the group's committed offsets,
// or from the start past the offsets after (by partition), to the end
// offsets listed now.
func (q *Queue) read(ctx context.Context, topic string, fromCommitted bool, after map[int32]int64) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ends, err := q.admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("kafka: end offsets: %w", err)
	}
	from := map[int32]int64{}
	if fromCommitted {
		if from, err = q.committed(ctx); err != nil {
			return nil, err
		}
	} else {
		starts, err := q.admin.ListStartOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("kafka: start offsets: %w", err)
		}
		starts.Each(func(o kadm.ListedOffset) { from[o.Partition] = o.Offset })
		for p, o := range after {
			from[p] = max(from[p], o+1)
		}
	}
	want := map[int32]kgo.Offset{}
	until := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > from[o.Partition] {
			want[o.Partition] = kgo.NewOffset().At(from[o.Partition])
			until[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(q.cfg.connection(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: reader: %w", err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(until) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("kafka: read %s: %w", topic, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := until[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			out = append(out, r)
			if r.Offset+1 >= end {
				delete(until, r.Partition)
			}
		})
	}
	return out, nil
}

// DeadLettersAfter reads the dead-letter topic past the offsets of the
// position after, oldest first within each partition, partition by
// partition. A position is each partition's last offset read,
// "partition:offset" joined by commas.
func (q *Queue) DeadLettersAfter(ctx context.Context, after string, limit int64) ([]core.DeadLetter, error) {
	read, err := parseOffsets(after)
	if err != nil {
		return nil, err
	}
	records, err := q.read(ctx, q.cfg.DeadTopic, false, read)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(records, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	var out []core.DeadLetter
	for _, r := range records[:min(int64(len(records)), limit)] {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		d := brokerevent.DecodeDeadLetter(r.Value, h, q.cfg.Signer)
		read[r.Partition] = r.Offset
		d.Position = formatOffsets(read)
		out = append(out, d)
	}
	return out, nil
}

// parseOffsets reads a dead-letter position ("" for none read yet).
func parseOffsets(position string) (map[int32]int64, error) {
	read := map[int32]int64{}
	for part := range strings.SplitSeq(position, ",") {
		if part == "" {
			continue
		}
		p, o, ok := strings.Cut(part, ":")
		pn, err1 := strconv.ParseInt(p, 10, 32)
		on, err2 := strconv.ParseInt(o, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("kafka: dead-letter position %q: want partition:offset,…", position)
		}
		read[int32(pn)] = on
	}
	return read, nil
}

func formatOffsets(read map[int32]int64) string {
	parts := make([]string, 0, len(read))
	for _, p := range slices.Sorted(maps.Keys(read)) {
		parts = append(parts, fmt.Sprintf("%d:%d", p, read[p]))
	}
	return strings.Join(parts, ",")
}

var (
	_ core.Queue     = (*Queue)(nil)
	_ core.Forwarder = (*Queue)(nil)
)
