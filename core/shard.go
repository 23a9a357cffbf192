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

// ShardQueues joins one queue per shard, all of one backend, into one
// Queue: the reservation hands a voucher's orders to its shard's queue, and
// consumer i of a process reads shard i mod the count. Stats add up over the
// shards, duties run for each, held orders are asked of the voucher's shard
// and dead letters of all; a capability any shard lacks, the join lacks.
// Each queue must be fed by the reservation with the same command; one
// queue is returned as it is.
func ShardQueues(shards Shards, queues []Queue) (Queue, error) {
	if len(queues) != shards.Count() || len(queues) == 0 {
		return nil, fmt.Errorf("shard queues: %d queues for %d shards", len(queues), shards.Count())
	}
	if len(queues) == 1 {
		return queues[0], nil
	}
	s := &sharded{shards: shards, queues: queues}
	for i, q := range queues {
		c := CapabilitiesOf(q)
		if c.Handoff == nil {
			return nil, fmt.Errorf("shard queues: %s is not fed by the reservation: only such queues can be sharded", c.Name)
		}
		if err := c.Handoff.Validate(); err != nil {
			return nil, fmt.Errorf("shard queues: shard %d: %w", i, err)
		}
		if i > 0 {
			first := s.caps[0]
			if c.Name != first.Name || c.Guarantees != first.Guarantees || !slices.Equal(c.Handoff.Command, first.Handoff.Command) ||
				c.Handoff.CountsReceivers != first.Handoff.CountsReceivers {
				return nil, fmt.Errorf("shard queues: shard %d (%s) differs from shard 0 (%s)", i, c.Name, first.Name)
			}
		}
		s.caps = append(s.caps, c)
	}
	return s, nil
}

type sharded struct {
	shards Shards
	queues []Queue
	// caps are each shard's, read once.
	caps []Capabilities
}

// Capabilities are shard 0's name, guarantees and command, with a Key that
// routes each voucher to its shard, and each further capability only when
// every shard has it.
func (s *sharded) Capabilities() Capabilities {
	h := *s.caps[0].Handoff
	h.Key = func(voucherID int64) string { return s.caps[s.shards.Of(voucherID)].Handoff.Key(voucherID) }
	c := Capabilities{Name: s.caps[0].Name, Guarantees: s.caps[0].Guarantees, Handoff: &h, Shards: len(s.queues)}
	stats, lists := true, true
	for _, sc := range s.caps {
		c.Duties = append(c.Duties, sc.Duties...)
		c.DeadLetters = append(c.DeadLetters, sc.DeadLetters...)
		stats, lists = stats && sc.Stats != nil, lists && sc.Lister != nil
	}
	if stats {
		c.Stats = StatsFunc(s.stats)
	}
	if lists {
		c.Lister, c.BucketLister = HeldBucketsFunc(s.heldOrders), HeldBucketsFunc(s.heldOrders)
	}
	return c
}

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

// stats adds depths, pending and dead letters over the shards, and takes
// the worst lag and oldest pending. A field any shard cannot tell is
// unknown.
func (s *sharded) stats(ctx context.Context) (QueueStats, error) {
	total := QueueStats{}
	for _, c := range s.caps {
		st, err := c.Stats.Stats(ctx)
		if err != nil {
			return UnknownStats, err
		}
		total.Depth = AddKnown(total.Depth, st.Depth)
		total.Pending = AddKnown(total.Pending, st.Pending)
		total.DeadLetters = AddKnown(total.DeadLetters, st.DeadLetters)
		total.Lag = MaxKnown(total.Lag, st.Lag)
		total.OldestPending = MaxKnown(total.OldestPending, st.OldestPending)
	}
	return total, nil
}

// AddKnown is a + b, or -1 (unknown) where either is: how counts of
// queues made of others add up.
func AddKnown[T ~int64](a, b T) T {
	if a < 0 || b < 0 {
		return -1
	}
	return a + b
}

// MaxKnown is max(a, b), or -1 (unknown) where either is.
func MaxKnown[T ~int64](a, b T) T {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

// heldOrders asks the shard of each of the voucher's buckets (one, for a
// voucher in one bucket).
func (s *sharded) heldOrders(ctx context.Context, voucherID int64, buckets int) ([]Order, error) {
	var all []Order
	asked := make(map[int]bool, buckets)
	for b := range max(buckets, 1) {
		shard := s.shards.OfBucket(voucherID, b, buckets)
		if asked[shard] {
			continue
		}
		asked[shard] = true
		held, err := s.caps[shard].Lister.HeldOrders(ctx, voucherID)
		if err != nil {
			return nil, err
		}
		all = append(all, held...)
	}
	return all, nil
}

// StatsFunc is a function as a QueueStatter (http.HandlerFunc's way): a
// queue made of others (the shards' join, the relay's) reports its stats
// with a method of its own.
type StatsFunc func(ctx context.Context) (QueueStats, error)

// Stats calls f.
func (f StatsFunc) Stats(ctx context.Context) (QueueStats, error) { return f(ctx) }
