// Package listqueue is the List iteration of the classic design: the
// reservation script LPUSHes each order and consumers BRPOP it.
//
// Plain mode is the classic one: a popped message exists only in the
// consumer's memory, so a consumer that dies before persisting loses it.
// Reliable mode (Config.Reliable) moves each message with BLMOVE into a
// processing list of its consumer and removes it after the commit; every
// consumer keeps a heartbeat key alive, and a reaper returns the processing
// list of a consumer whose heartbeat expired to the queue.
package listqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/internal/consumername"
	"github.com/seckill-lab/seckill/adapters/internal/deadstream"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// Name is the SECKILL_QUEUE value of this backend.
const Name = "list"

// Config configures the queue. Zero values take the defaults.
type Config struct {
	// Key is the list the reservation LPUSHes to. Default "seckill:orders:list".
	Key string
	// Reliable turns on processing lists, heartbeats and the reaper.
	Reliable bool
	// ConsumerPrefix names this process's consumers. Default: hostname, pid
	// and a random suffix. A stable name (a pod name) lets a restarted
	// process take back its own processing list at once.
	ConsumerPrefix string
	// HeartbeatTTL: a consumer whose heartbeat is older is dead, and its
	// processing list goes back to the queue. Default 10s.
	HeartbeatTTL time.Duration
	// ReapInterval is how often dead consumers are looked for.
	// Default HeartbeatTTL/2.
	ReapInterval time.Duration
	// Block is how long one BRPOP/BLMOVE waits, in whole seconds (what the
	// commands take). Default and minimum 1s.
	Block time.Duration
	// DeadLetterStream receives messages the pipeline gives up on.
	// Default Key + ":dead".
	DeadLetterStream string
}

func (c *Config) setDefaults() {
	if c.Key == "" {
		c.Key = "seckill:orders:list"
	}
	if c.ConsumerPrefix == "" {
		c.ConsumerPrefix = consumername.Default()
	}
	if c.HeartbeatTTL <= 0 {
		c.HeartbeatTTL = 10 * time.Second
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = c.HeartbeatTTL / 2
	}
	c.Block = max(c.Block.Round(time.Second), time.Second)
	if c.DeadLetterStream == "" {
		c.DeadLetterStream = c.Key + ":dead"
	}
}

var reclaimScript = redis.NewScript(lua.ReclaimList)

// oomFetchScript is the reliable fetch while Redis is out of memory.
var oomFetchScript = redis.NewScript(lua.FetchListOOM)

// Queue implements core.Queue.
type Queue struct {
	rdb redis.UniversalClient
	cfg Config
	log *slog.Logger

	stop     chan struct{} // closed by Close: every consumer is closed
	stopOnce sync.Once
	seq      atomic.Int64

	mu   sync.Mutex
	live map[string]bool // consumers whose heartbeat the duty renews
}

func New(rdb redis.UniversalClient, cfg Config, log *slog.Logger) *Queue {
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Queue{rdb: rdb, cfg: cfg, log: log, stop: make(chan struct{}), live: map[string]bool{}}
}

// Capabilities: the reservation script feeds the list with LPUSH, consumed
// from the right, so the oldest order is taken first. Reliable mode keeps
// each delivery in the consumer's processing list until it is acked, so
// what it holds is complete and survives a consumer's crash; plain mode
// holds what it popped only in memory.
func (q *Queue) Capabilities() core.Capabilities {
	return core.Capabilities{
		Name: Name,
		Guarantees: core.Guarantees{
			DurableAcrossConsumerCrash: q.cfg.Reliable,
			Acknowledged:               q.cfg.Reliable,
			CompetingConsumers:         true,
			RetainsWithoutConsumer:     true,
			CountsDeliveries:           q.cfg.Reliable, // a count beside the processing list
		},
		Handoff: &core.Handoff{
			Command: []string{"LPUSH", core.HandoffKey, core.HandoffBody},
			Key:     func(int64) string { return q.cfg.Key },
		},
		Duties: q.duties(), Stats: q, Lister: q, DeadLetters: []core.DeadLetterSource{deadstream.Source(q.rdb, q.cfg.DeadLetterStream)},
	}
}

// Config returns the effective configuration.
func (q *Queue) Config() Config { return q.cfg }

func (q *Queue) processingKey(name string) string { return q.cfg.Key + ":processing:" + name }
func (q *Queue) aliveKey(name string) string      { return q.cfg.Key + ":alive:" + name }
func (q *Queue) consumersKey() string             { return q.cfg.Key + ":consumers" }
func (q *Queue) attemptsKey() string              { return q.cfg.Key + ":attempts" }

// Consumer returns consumer ConsumerPrefix-index. In reliable mode it first
// takes back what an earlier process of the same name left in its
// processing list, then beats its heartbeat once; the heartbeat duty keeps
// it alive from then on, until Close.
func (q *Queue) Consumer(ctx context.Context, index int) (core.Consumer, error) {
	c := &consumer{q: q, name: consumername.Of(q.cfg.ConsumerPrefix, index), closed: make(chan struct{})}
	if !q.cfg.Reliable {
		return c, nil
	}
	// Same name, so the earlier holder of this list is this consumer's
	// dead predecessor, whatever its heartbeat says.
	if _, err := q.reclaim(ctx, c.name, true); err != nil {
		return nil, err
	}
	if err := q.register(ctx, c.name); err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.live[c.name] = true
	q.mu.Unlock()
	return c, nil
}

// reclaim returns name's processing list to the queue if name is dead, or
// in any case with force.
func (q *Queue) reclaim(ctx context.Context, name string, force bool) (int64, error) {
	forced := "0"
	if force {
		forced = "1"
	}
	n, err := reclaimScript.Run(ctx, q.rdb,
		[]string{q.aliveKey(name), q.processingKey(name), q.cfg.Key, q.consumersKey(), q.attemptsKey()},
		name, forced).Int64()
	if err != nil {
		return 0, fmt.Errorf("listqueue: reclaim %s: %w", name, err)
	}
	return n, nil
}

// duties are the reliable mode's: the heartbeat of this process's live
// consumers, and the reaper of dead ones' processing lists. Plain mode has
// none.
func (q *Queue) duties() []core.Duty {
	if !q.cfg.Reliable {
		return nil
	}
	return []core.Duty{
		{Name: "heartbeat", Every: q.cfg.HeartbeatTTL / 3, Do: q.beatLive},
		{Name: "reap", Every: q.cfg.ReapInterval, Do: q.Reap},
	}
}

// beatLive renews the heartbeat of every consumer of this process that is
// not closed, in one round trip.
func (q *Queue) beatLive(ctx context.Context) error {
	q.mu.Lock()
	names := make([]string, 0, len(q.live))
	for name := range q.live {
		names = append(names, name)
	}
	q.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, name := range names {
			p.Set(ctx, q.aliveKey(name), time.Now().UnixMilli(), q.cfg.HeartbeatTTL)
		}
		return nil
	})
	if outOfMemory(err) {
		// Refused while Redis is full; each fetch beats its consumer's
		// heartbeat out of memory then (moveOutOfMemory).
		return nil
	}
	if err != nil {
		return fmt.Errorf("listqueue: heartbeat: %w", err)
	}
	return nil
}

// register beats name's heartbeat and puts it among the consumers the
// reapers watch, in one round trip. Every reliable fetch does it first, so
// a consumer a reaper took for dead (its heartbeat lapsed while the duty
// was not running) is watched again before it takes another message.
func (q *Queue) register(ctx context.Context, name string) error {
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, q.aliveKey(name), time.Now().UnixMilli(), q.cfg.HeartbeatTTL)
		p.SAdd(ctx, q.consumersKey(), name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("listqueue: register consumer %s: %w", name, err)
	}
	return nil
}

// Reap returns the processing lists of dead consumers to the queue.
func (q *Queue) Reap(ctx context.Context) error {
	names, err := q.rdb.SMembers(ctx, q.consumersKey()).Result()
	if err != nil {
		return fmt.Errorf("listqueue: consumers: %w", err)
	}
	for _, name := range names {
		n, err := q.reclaim(ctx, name, false)
		if err != nil {
			return err
		}
		if n > 0 {
			q.log.Warn("returned a dead consumer's messages to the queue", "consumer", name, "messages", n)
		}
	}
	return nil
}

// Close stops this process's consumers, and with them their heartbeats.
// What they still hold goes back to the queue once the heartbeats expire.
func (q *Queue) Close() error {
	q.stopOnce.Do(func() { close(q.stop) })
	q.mu.Lock()
	clear(q.live)
	q.mu.Unlock()
	return nil
}

type consumer struct {
	q      *Queue
	name   string
	closed chan struct{}
	once   sync.Once

	// Reliable mode: held counts the bodies this consumer fetched and has
	// not acked; stranded is set when a move may have moved messages into
	// the processing list and lost the reply (a connection reset, a Redis
	// restart, a timeout), so that nobody — not even the reaper, since
	// this consumer lives — would ever deliver them.
	mu       sync.Mutex
	held     map[string]int
	stranded bool
	// oom: the last fetch found Redis out of memory (logged once a spell).
	oom atomic.Bool
}

func (c *consumer) hold(bodies []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[string]int{}
	}
	for _, b := range bodies {
		c.held[b]++
	}
}

func (c *consumer) release(ds []core.Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range ds {
		b := string(d.Body)
		if n, ok := c.held[b]; ok && n > 1 {
			c.held[b] = n - 1
		} else {
			delete(c.held, b) // deleting from a nil map is a no-op
		}
	}
}

// holding is how many messages this consumer holds.
func (c *consumer) holding() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.held {
		n += k
	}
	return n
}

func (c *consumer) strand() {
	c.mu.Lock()
	c.stranded = true
	c.mu.Unlock()
}

// recoverStranded returns what the processing list has beyond what this
// consumer holds: messages moved there by a move whose reply was lost.
func (c *consumer) recoverStranded(ctx context.Context) ([]string, error) {
	all, err := c.q.rdb.LRange(ctx, c.q.processingKey(c.name), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("listqueue: read own processing list: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]int{}
	var out []string
	for _, b := range all {
		if seen[b]++; seen[b] > c.held[b] {
			out = append(out, b)
		}
	}
	return out, nil
}

var errClosed = errors.New("listqueue: consumer closed")

func (c *consumer) isClosed() bool {
	select {
	case <-c.closed:
		return true
	case <-c.q.stop:
		return true
	default:
		return false
	}
}

func (c *consumer) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	if c.isClosed() {
		return nil, errClosed
	}
	if c.q.cfg.Reliable {
		ds, err := c.fetchReliable(ctx, max)
		if err != nil {
			c.strand() // a move may have run, unheard
		}
		return ds, err
	}
	return c.fetchPlain(ctx, max)
}

func (c *consumer) fetchPlain(ctx context.Context, max int) ([]core.Delivery, error) {
	first, err := c.q.rdb.BRPop(ctx, c.q.cfg.Block, c.q.cfg.Key).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listqueue: brpop: %w", err)
	}
	bodies := []string{first[1]}
	if max > 1 {
		more, err := c.q.rdb.RPopCount(ctx, c.q.cfg.Key, max-1).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			// The first message is already popped: hand it over anyway.
			c.q.log.Warn("rpop failed after brpop", "err", err)
		}
		bodies = append(bodies, more...)
	}
	return c.deliveries(bodies, nil), nil
}

func (c *consumer) fetchReliable(ctx context.Context, max int) ([]core.Delivery, error) {
	err := c.q.register(ctx, c.name)
	var bodies []string
	if err == nil {
		bodies, err = c.moveBatch(ctx, max)
	}
	if outOfMemory(err) {
		bodies, err = c.moveOutOfMemory(ctx, max)
	} else if err == nil {
		c.oom.Store(false)
	}
	if err != nil || len(bodies) == 0 {
		return nil, err
	}
	c.hold(bodies)
	counts, err := c.q.rdb.HMGet(ctx, c.q.attemptsKey(), bodies...).Result()
	if err != nil {
		// The batch is in the processing list; attempts are a nicety.
		c.q.log.Warn("reading redelivery counts failed", "err", err)
		counts = nil
	}
	return c.deliveries(bodies, counts), nil
}

// moveBatch moves up to max messages into the processing list and returns
// them; first those a lost reply stranded there, if any.
func (c *consumer) moveBatch(ctx context.Context, max int) ([]string, error) {
	c.mu.Lock()
	stranded := c.stranded
	c.mu.Unlock()
	if stranded {
		bodies, err := c.recoverStranded(ctx)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.stranded = false
		c.mu.Unlock()
		if len(bodies) > 0 {
			c.q.log.Warn("took back messages a lost reply left in the processing list", "consumer", c.name, "messages", len(bodies))
			return bodies, nil
		}
	}
	processing := c.q.processingKey(c.name)
	first, err := c.q.rdb.BLMove(ctx, c.q.cfg.Key, processing, "RIGHT", "LEFT", c.q.cfg.Block).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listqueue: blmove: %w", err)
	}
	bodies := []string{first}
	// The rest of the batch in one round trip (a nil means empty), and the
	// processing list's length after it: more than this consumer holds
	// means a move ran whose reply was lost — go-redis retries a command
	// on a broken connection, so even a fetch that succeeded may have
	// moved a message before the one it returned.
	var length *redis.IntCmd
	cmds, err := c.q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range max - 1 {
			p.LMove(ctx, c.q.cfg.Key, processing, "RIGHT", "LEFT")
		}
		length = p.LLen(ctx, processing)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		c.strand() // some moves may have run unheard; the next fetch looks
	}
	for _, cmd := range cmds {
		if m, ok := cmd.(*redis.StringCmd); ok {
			if s, err := m.Result(); err == nil {
				bodies = append(bodies, s)
			}
		}
	}
	if n, err := length.Result(); err == nil && n > int64(c.holding()+len(bodies)) {
		c.strand()
	}
	return bodies, nil
}

// outOfMemory reports whether Redis refused a command for want of memory:
// maxmemory reached under noeviction.
func outOfMemory(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "OOM ")
}

// oomPause is how long a consumer waits after a fetch out of memory that
// found the queue empty (that fetch does not block).
const oomPause = 100 * time.Millisecond

// moveOutOfMemory is the fetch while Redis is out of memory and refuses
// the heartbeat and BLMOVE: the same steps in one script Redis allows
// then. Refused, the consumers would stop while the queue holds the
// orders — and the memory — that draining it would free: a sale on a full
// Redis that lost none of its answered orders in plain mode lost 651 to
// this mode's stall in the lab's run.
func (c *consumer) moveOutOfMemory(ctx context.Context, max int) ([]string, error) {
	if !c.oom.Swap(true) {
		c.q.log.Warn("Redis is out of memory (maxmemory under noeviction): this consumer moves messages with a script allowed out of memory, so the queue drains",
			"consumer", c.name)
	}
	q := c.q
	bodies, err := oomFetchScript.Run(ctx, q.rdb,
		[]string{q.aliveKey(c.name), q.processingKey(c.name), q.cfg.Key, q.consumersKey()},
		c.name, q.cfg.HeartbeatTTL.Milliseconds(), max, time.Now().UnixMilli()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("listqueue: fetch out of memory: %w", err)
	}
	if len(bodies) == 0 {
		select {
		case <-ctx.Done():
		case <-time.After(oomPause):
		}
	}
	return bodies, nil
}

func (c *consumer) deliveries(bodies []string, redeliveries []any) []core.Delivery {
	out := make([]core.Delivery, len(bodies))
	for i, b := range bodies {
		attempt := 1
		if i < len(redeliveries) {
			if s, ok := redeliveries[i].(string); ok {
				n, _ := strconv.Atoi(s)
				attempt += n
			}
		}
		out[i] = core.Delivery{ID: c.name + ":" + strconv.FormatInt(c.q.seq.Add(1), 10), Body: []byte(b), Attempt: attempt}
	}
	return out
}

// Ack removes the messages from the processing list (reliable mode).
func (c *consumer) Ack(ctx context.Context, ds []core.Delivery) error {
	if !c.q.cfg.Reliable || len(ds) == 0 {
		return nil
	}
	processing := c.q.processingKey(c.name)
	_, err := c.q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		fields := make([]string, len(ds))
		for i, d := range ds {
			p.LRem(ctx, processing, 1, d.Body)
			fields[i] = string(d.Body)
		}
		p.HDel(ctx, c.q.attemptsKey(), fields...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("listqueue: ack: %w", err)
	}
	c.release(ds)
	return nil
}

// DeadLetter moves a message to the dead-letter stream and, in reliable
// mode, out of the processing list, in one MULTI.
func (c *consumer) DeadLetter(ctx context.Context, d core.Delivery, reason string) error {
	_, err := c.q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		deadstream.Add(ctx, p, c.q.cfg.DeadLetterStream, core.DeadLetterOf(Name, c.name, d, reason))
		if c.q.cfg.Reliable {
			p.LRem(ctx, c.q.processingKey(c.name), 1, d.Body)
			p.HDel(ctx, c.q.attemptsKey(), string(d.Body))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listqueue: dead-letter: %w", err)
	}
	c.release([]core.Delivery{d})
	return nil
}

// Close stops this consumer's heartbeat; its processing list stays until
// the heartbeat expires and a reaper (or this name, restarted) takes it.
func (c *consumer) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.q.mu.Lock()
		delete(c.q.live, c.name)
		c.q.mu.Unlock()
	})
	return nil
}

var _ core.Queue = (*Queue)(nil)

// Stats is the queue's core.StatsReporter. Pending (reliable mode) sums the
// processing lists of the registered consumers.
func (q *Queue) Stats(ctx context.Context) (core.QueueStats, error) {
	s := core.UnknownStats
	var depth, dead *redis.IntCmd
	var names *redis.StringSliceCmd
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		depth = p.LLen(ctx, q.cfg.Key)
		dead = p.XLen(ctx, q.cfg.DeadLetterStream)
		names = p.SMembers(ctx, q.consumersKey())
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("listqueue: stats: %w", err)
	}
	s.Depth, s.DeadLetters = depth.Val(), dead.Val()
	if !q.cfg.Reliable {
		return s, nil
	}
	cmds, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, n := range names.Val() {
			p.LLen(ctx, q.processingKey(n))
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("listqueue: stats: %w", err)
	}
	s.Pending = 0
	for _, c := range cmds {
		s.Pending += c.(*redis.IntCmd).Val()
	}
	return s, nil
}

// HeldOrders reports the voucher's orders still in the list and, in
// reliable mode, in the consumers' processing lists. A plain-mode consumer
// holds what it popped only in its memory: those are not reported.
func (q *Queue) HeldOrders(ctx context.Context, voucherID int64) ([]core.Order, error) {
	keys := []string{q.cfg.Key}
	if q.cfg.Reliable {
		names, err := q.rdb.SMembers(ctx, q.consumersKey()).Result()
		if err != nil {
			return nil, fmt.Errorf("listqueue: consumers: %w", err)
		}
		for _, n := range names {
			keys = append(keys, q.processingKey(n))
		}
	}
	var bodies []string
	for _, k := range keys {
		b, err := q.rdb.LRange(ctx, k, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("listqueue: held orders: %w", err)
		}
		bodies = append(bodies, b...)
	}
	return core.OrdersOfVoucher(voucherID, bodies), nil
}
