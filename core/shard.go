package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Shards spreads a sale over a fixed number of queue shards. A blocking
// read (XREADGROUP, BRPOP) reads one key, and on a Redis Cluster the keys of
// one script call must share a slot: so each shard has a hash tag, each
// voucher belongs to one shard, and the voucher's keys and its shard's queue
// key all carry that shard's tag. Every process then reads each shard's
// queue, whatever vouchers exist: a voucher created while consumers run is
// consumed at once.
//
// The tags are chosen by whoever knows the store's hashing (on Redis, the
// slot of each tag: redisreserve.SpreadShards spreads them over the slot
// range); core only maps vouchers to shards.
type Shards struct{ tags []string }

// NewShards returns the shards with these tags, shard i having tags[i].
func NewShards(tags ...string) (Shards, error) {
	if len(tags) == 0 {
		return Shards{}, errors.New("shards: want at least one")
	}
	seen := make(map[string]bool, len(tags))
	for i, t := range tags {
		if t == "" || strings.ContainsAny(t, "{}") {
			return Shards{}, fmt.Errorf("shards: tag %d is %q: want a non-empty tag without braces", i, t)
		}
		if seen[t] {
			return Shards{}, fmt.Errorf("shards: tag %q appears twice", t)
		}
		seen[t] = true
	}
	return Shards{tags: slices.Clone(tags)}, nil
}

// Count is the number of shards; 0 for the zero Shards, which has none.
func (s Shards) Count() int { return len(s.tags) }

// Of is the shard a voucher belongs to: its id modulo the count, so
// vouchers created one after another land on shards in turn.
func (s Shards) Of(voucherID int64) int {
	n := int64(len(s.tags))
	return int(((voucherID % n) + n) % n)
}

// Tag is a shard's hash tag, without braces.
func (s Shards) Tag(shard int) string { return s.tags[shard] }

// TagOf is the hash tag of a voucher's shard.
func (s Shards) TagOf(voucherID int64) string { return s.tags[s.Of(voucherID)] }

// Equal reports whether two Shards map every voucher to the same tag.
func (s Shards) Equal(o Shards) bool { return slices.Equal(s.tags, o.tags) }

// ShardedQueue is implemented by a queue made of one queue per shard
// (ShardQueues). Every shard needs a consumer in every process, so the
// pipeline runs at least ShardCount consumers.
type ShardedQueue interface {
	ShardCount() int
}

// ShardQueues joins one queue per shard, all of one backend, into one
// Queue: the reservation hands a voucher's orders to its shard's queue, and
// consumer i of a process reads shard i mod the count. Stats add up over the
// shards, duties run for each, held orders are asked of the voucher's shard
// and dead letters of all. Each queue must be fed by the reservation with
// the same command; one queue is returned as it is.
func ShardQueues(shards Shards, queues []Queue) (Queue, error) {
	if len(queues) != shards.Count() || len(queues) == 0 {
		return nil, fmt.Errorf("shard queues: %d queues for %d shards", len(queues), shards.Count())
	}
	if len(queues) == 1 {
		return queues[0], nil
	}
	s := &sharded{shards: shards, queues: queues}
	holders, readers := true, true
	for i, q := range queues {
		fed := CapabilitiesOf(q).Handoff
		if fed == nil {
			return nil, fmt.Errorf("shard queues: %s is not fed by the reservation: only such queues can be sharded", q.Name())
		}
		h := fed.Handoff()
		if err := h.Validate(); err != nil {
			return nil, fmt.Errorf("shard queues: shard %d: %w", i, err)
		}
		if i > 0 && (q.Name() != queues[0].Name() || !slices.Equal(h.Command, s.handoffs[0].Command) ||
			h.CountsReceivers != s.handoffs[0].CountsReceivers) {
			return nil, fmt.Errorf("shard queues: shard %d (%s) differs from shard 0 (%s)", i, q.Name(), queues[0].Name())
		}
		s.handoffs = append(s.handoffs, h)
		caps := CapabilitiesOf(q)
		s.listers, s.readers = append(s.listers, caps.Lister), append(s.readers, caps.DeadLetters)
		holders, readers = holders && caps.Lister != nil, readers && caps.DeadLetters != nil
	}
	switch {
	case holders && readers:
		return shardedHolderReader{s}, nil
	case holders:
		return shardedHolder{s}, nil
	case readers:
		return shardedReader{s}, nil
	}
	return s, nil
}

type sharded struct {
	shards   Shards
	queues   []Queue
	handoffs []Handoff
	// listers and readers are each shard's (nil where it has none).
	listers []OrderHolder
	readers []DeadLetterReader
}

func (s *sharded) Name() string           { return s.queues[0].Name() }
func (s *sharded) Guarantees() Guarantees { return s.queues[0].Guarantees() }
func (s *sharded) ShardCount() int        { return len(s.queues) }

func (s *sharded) Consumer(ctx context.Context, index int) (Consumer, error) {
	n := len(s.queues)
	return s.queues[index%n].Consumer(ctx, index/n)
}

func (s *sharded) Close() error {
	var errs []error
	for _, q := range s.queues {
		errs = append(errs, q.Close())
	}
	return errors.Join(errs...)
}

func (s *sharded) Handoff() Handoff {
	h := s.handoffs[0]
	h.Key = func(voucherID int64) string { return s.handoffs[s.shards.Of(voucherID)].Key(voucherID) }
	return h
}

func (s *sharded) Duties() []Duty {
	var all []Duty
	for _, q := range s.queues {
		all = append(all, CapabilitiesOf(q).Duties...)
	}
	return all
}

// Stats adds depths, pending and dead letters over the shards, and takes
// the worst lag and oldest pending. A field any shard cannot tell is
// unknown.
func (s *sharded) Stats(ctx context.Context) (QueueStats, error) {
	total := QueueStats{}
	for _, q := range s.queues {
		r := CapabilitiesOf(q).Stats
		if r == nil {
			return UnknownStats, nil
		}
		st, err := r.Stats(ctx)
		if err != nil {
			return UnknownStats, err
		}
		total.Depth = addKnown(total.Depth, st.Depth)
		total.Pending = addKnown(total.Pending, st.Pending)
		total.DeadLetters = addKnown(total.DeadLetters, st.DeadLetters)
		total.Lag = maxKnown(total.Lag, st.Lag)
		total.OldestPending = maxKnown(total.OldestPending, st.OldestPending)
	}
	return total, nil
}

func addKnown[T ~int64](a, b T) T {
	if a < 0 || b < 0 {
		return -1
	}
	return a + b
}

func maxKnown[T ~int64](a, b T) T {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

func (s *sharded) heldOrders(ctx context.Context, voucherID int64) ([]Order, error) {
	return s.listers[s.shards.Of(voucherID)].HeldOrders(ctx, voucherID)
}

// deadLetters takes up to max from each shard and keeps the oldest max.
func (s *sharded) deadLetters(ctx context.Context, max int64) ([]DeadLetter, error) {
	var all []DeadLetter
	for _, r := range s.readers {
		ds, err := r.DeadLetters(ctx, max)
		if err != nil {
			return nil, err
		}
		all = append(all, ds...)
	}
	slices.SortStableFunc(all, func(a, b DeadLetter) int { return a.At.Compare(b.At) })
	if int64(len(all)) > max {
		all = all[:max]
	}
	return all, nil
}

type shardedHolder struct{ *sharded }

func (s shardedHolder) HeldOrders(ctx context.Context, voucherID int64) ([]Order, error) {
	return s.heldOrders(ctx, voucherID)
}

type shardedReader struct{ *sharded }

func (s shardedReader) DeadLetters(ctx context.Context, max int64) ([]DeadLetter, error) {
	return s.deadLetters(ctx, max)
}

type shardedHolderReader struct{ *sharded }

func (s shardedHolderReader) HeldOrders(ctx context.Context, voucherID int64) ([]Order, error) {
	return s.heldOrders(ctx, voucherID)
}

func (s shardedHolderReader) DeadLetters(ctx context.Context, max int64) ([]DeadLetter, error) {
	return s.deadLetters(ctx, max)
}

var (
	_ Queue            = (*sharded)(nil)
	_ FedByReservation = (*sharded)(nil)
	_ MaintainedQueue  = (*sharded)(nil)
	_ StatsReporter    = (*sharded)(nil)
	_ ShardedQueue     = (*sharded)(nil)
	_ OrderHolder      = shardedHolderReader{}
	_ DeadLetterReader = shardedHolderReader{}
)
