package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/relay"
)

// The key layout is the number of shards the sale's keys are spread over
// (core.Shards): every voucher's keys and its shard's queue key carry the
// shard's hash tag. It is recorded in Redis, so instances agree on it and a
// restart keeps it without being told.
const (
	// defaultClusterShards suits a cluster of 2, 3, 4 or 6 masters (each
	// gets the same number of shards) and keeps one blocking reader per
	// shard cheap. One Redis gets one shard: more would add readers, not
	// speed, since one Redis runs one script at a time.
	defaultClusterShards = 12
	// maxShards bounds the blocking readers a process opens.
	maxShards = 64
)

// lingerFor is the consumers' default linger (core.PipelineConfig.Linger)
// for a sale of n shards: none for one, 5 ms per further shard, at most
// 50 ms. Each shard's consumer sees 1/n of the orders; without a linger it
// commits them a few at a time. Measured on 2 cores, one Redis, 12
// vouchers, streamgroup (seckill-lab compare -vouchers 12): 18.8k req/s with one
// shard; with 12 shards 8.6k without a linger, 13.1k with 20 ms, 16.0k with
// 50 ms.
func lingerFor(n int) time.Duration {
	return min(time.Duration(max(n-1, 0))*5*time.Millisecond, 50*time.Millisecond)
}

// layoutError is a refusal to start over the key layout; it says what to do.
type layoutError struct{ msg string }

func (e *layoutError) Error() string { return e.msg }

// layoutPlan is the key layout a server runs with, and what bringing Redis
// to it takes: planned at New, carried out by MigrateLayout.
type layoutPlan struct {
	keys redisreserve.Keys
	// recorded is the shard count Redis recorded (0: none).
	recorded int
	// moves are the vouchers whose keys are in another layout.
	moves  []redisreserve.VoucherMove
	legacy bool
}

// planLayout decides the shards this server runs with — SECKILL_SHARDS,
// else the count recorded in Redis, else the default for the topology —
// and what bringing Redis to that layout takes, changing nothing:
//
//   - vouchers whose keys are in another layout (another count, or the
//     layout before shards) are to be moved, each in one script, on one
//     Redis; a cluster cannot move keys between slots atomically, so there
//     the server refuses to start instead;
//   - it refuses to start while the queues of the layout it leaves still
//     hold orders: those would never be read again. The message says how
//     to drain them.
//
// Changing the layout is for a deployment whose instances are all stopped:
// an instance still running keeps writing the old layout.
func (s *Server) planLayout(ctx context.Context, b Backend) (layoutPlan, error) {
	keys := redisreserve.Keys{Prefix: s.cfg.KeyPrefix}
	recorded, err := s.rdb.HGet(ctx, keys.Layout(), "shards").Int()
	if errors.Is(err, redis.Nil) {
		recorded = 0
	} else if err != nil {
		return layoutPlan{}, fmt.Errorf("read the key layout (%s): %w", keys.Layout(), err)
	}
	n := s.cfg.Shards
	if n == 0 {
		n = recorded
	}
	if n == 0 {
		n = map[bool]int{true: defaultClusterShards, false: 1}[s.clustered]
	}
	keys.Shards = redisreserve.SpreadShards(n)
	plan := layoutPlan{keys: keys, recorded: recorded}
	if plan.moves, err = redisreserve.FindMoves(ctx, s.rdb, keys); err != nil {
		return layoutPlan{}, err
	}
	for _, m := range plan.moves {
		plan.legacy = plan.legacy || m.Legacy()
	}
	if b.Sale == nil {
		if recorded != 0 && recorded != n {
			if err := s.refuseIfQueuesHold(ctx, b, Deps{Shards: redisreserve.SpreadShards(recorded)}, recorded,
				fmt.Sprintf("SECKILL_SHARDS=%d, but this Redis records %d shards", n, recorded),
				fmt.Sprintf("start with SECKILL_SHARDS=%d (or unset)", recorded)); err != nil {
				return layoutPlan{}, err
			}
		}
		if plan.legacy {
			if err := s.refuseIfQueuesHold(ctx, b, Deps{legacy: true}, 1,
				"this Redis holds a sale in the key layout before shards",
				"start the previous version of the server"); err != nil {
				return layoutPlan{}, err
			}
		}
	}
	if len(plan.moves) > 0 && s.clustered {
		return layoutPlan{}, &layoutError{fmt.Sprintf(
			"%d vouchers' keys are in another key layout (e.g. %s; %d shards wanted, %d recorded) and a Redis Cluster cannot move keys between slots atomically: "+
				"start with SECKILL_SHARDS=%d (or unset) to keep the recorded layout, or let those sales end and delete their keys first",
			len(plan.moves), plan.moves[0].From.Stock, n, recorded, max(recorded, 1))}
	}
	return plan, nil
}

// migrateLayout brings Redis to the planned layout: it moves each voucher
// (and each bucket of a voucher in buckets) whose keys are in another one
// (one script each: stock, window, buyers and transfers together) and
// records the shard count. Serve runs it before any of its
// services starts, so nothing is served from a layout half moved.
func (s *Server) migrateLayout(ctx context.Context, plan layoutPlan) error {
	n := plan.keys.Shards.Count()
	if len(plan.moves) > 0 {
		moved := 0
		for _, m := range plan.moves {
			ok, err := redisreserve.MoveVoucher(ctx, s.rdb, m)
			if err != nil {
				return err
			}
			if ok {
				moved++
			}
		}
		s.log.Warn("moved vouchers' keys to the current key layout", "vouchers_and_buckets", moved, "shards", n,
			"recorded_shards", plan.recorded, "from_layout_before_shards", plan.legacy)
	}
	if plan.recorded != n {
		if err := s.rdb.HSet(ctx, plan.keys.Layout(), "shards", strconv.Itoa(n)).Err(); err != nil {
			return fmt.Errorf("record the key layout: %w", err)
		}
	}
	return nil
}

// refuseIfQueuesHold opens b's queues in an earlier layout and refuses to
// start if they still hold orders (waiting or delivered and unacked).
func (s *Server) refuseIfQueuesHold(ctx context.Context, b Backend, old Deps, count int, why, drain string) error {
	q, err := s.openQueues(ctx, b, old, count)
	if err != nil {
		return fmt.Errorf("open the queues of the earlier key layout to check them: %w", err)
	}
	defer q.Close()
	r := core.CapabilitiesOf(q).Stats
	if r == nil {
		return nil
	}
	st, err := r.Stats(ctx)
	if err != nil {
		return fmt.Errorf("check the queues of the earlier key layout: %w", err)
	}
	held := max(st.Depth, 0) + max(st.Pending, 0)
	if held == 0 {
		return nil
	}
	return &layoutError{fmt.Sprintf(
		"%s, and its %s queues still hold %d orders that this layout would never read: %s, stop the shoppers' traffic, "+
			"let the consumers run until /metrics shows seckill_queue_depth and seckill_queue_pending at 0, then start this one",
		why, b.Name, held, drain)}
}

// openQueues opens b once per shard of the layout base describes (one
// queue for a backend the reservation does not feed) and joins them.
func (s *Server) openQueues(ctx context.Context, b Backend, base Deps, count int) (core.Queue, error) {
	if b.Broker != nil {
		return s.openRelayed(ctx, b, base, count)
	}
	queues := make([]core.Queue, 0, count)
	closeAll := func() {
		for _, q := range queues {
			q.Close()
		}
	}
	for i := range count {
		d := base
		d.Config, d.Redis, d.Store, d.Log, d.Shard = s.cfg, s.rdb, s.store, s.log, i
		d.Forgotten = s.forgotten
		if !base.legacy {
			d.Forgotten = s.forgottenOn(base.Shards, i)
		}
		q, err := b.Open(ctx, d)
		if err != nil {
			closeAll()
			return nil, err
		}
		queues = append(queues, q)
		if core.CapabilitiesOf(q).Handoff == nil {
			// An in-process queue is one queue, whatever the shards.
			return q, nil
		}
	}
	shards := base.Shards
	if base.legacy {
		shards = redisreserve.SpreadShards(1)
	}
	q, err := core.ShardQueues(shards, queues)
	if err != nil {
		closeAll()
		return nil, err
	}
	return q, nil
}

// outbox is the queue the reservation writes for an outside broker: a
// stream per shard, read by the relays' consumer group, which claims what
// a dead relay held (SECKILL_CLAIM_MIN_IDLE) and trims what was forwarded.
var outbox = Backend{
	Name: "outbox",
	Open: func(ctx context.Context, d Deps) (core.Queue, error) {
		return streamgroup.New(ctx, d.Redis, streamgroup.Config{Stream: d.QueueKey("outbox"), Group: "seckill-relays",
			ClaimMinIdle: d.Config.ClaimMinIdle, ConsumerPrefix: d.Config.ConsumerName, Forgotten: d.Forgotten}, d.Log)
	},
}

// openRelayed opens an outside broker's backend: the outbox, sharded as
// the layout says, the broker once, and the relay between them.
func (s *Server) openRelayed(ctx context.Context, b Backend, base Deps, count int) (core.Queue, error) {
	box, err := s.openQueues(ctx, outbox, base, count)
	if err != nil {
		return nil, fmt.Errorf("open the outbox: %w", err)
	}
	d := base
	d.Config, d.Redis, d.Store, d.Log, d.Forgotten = s.cfg, s.rdb, s.store, s.log, s.forgotten
	d.Tracer = s.tracing.libraryProvider()
	broker, err := b.Broker(ctx, d)
	if err != nil {
		box.Close()
		return nil, err
	}
	q, err := relay.New(box, s.spans().Broker(broker), relay.Config{Log: s.log, OutboxCap: s.cfg.OutboxCap})
	if err != nil {
		box.Close()
		broker.Close()
		return nil, err
	}
	return q, nil
}
