package redisreserve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// Epoch is the ID worker's time origin, 2022-01-01T00:00:00Z, as in the
// classic design.
var Epoch = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

var nextIDScript = redis.NewScript(lua.NextID)

// IssuedAt is the second an id of the IDWorker was issued in (its high
// 32 bits): how old an order id is, without a lookup.
func IssuedAt(id int64) time.Time { return Epoch.Add(time.Duration(id>>32) * time.Second) }

// IDWorker is the classic Redis ID worker: (seconds since Epoch) << 32 |
// a per-UTC-day counter. The counter is taken from Redis in blocks, so most
// ids cost no round trip; ids stay unique because the (day, counter) pair is
// unique and a block is dropped when the day changes.
//
// The day's counter is split into idLanes lanes, each a key of its own
// (Keys.IDLane) whose ids have the lane in the sequence's top bits: lane
// n's sequences are n·2^28 + its counter. A worker takes its blocks from
// one lane, lane 0 first — the one counter of versions before lanes, so
// their ids and these never meet — and moves to another when its lane
// cannot be asked (its master down: on a cluster the lanes are spread over
// every master) or is used up for the day, so one master out of reach
// does not stop every sale's ids.
type IDWorker struct {
	rdb       redis.UniversalClient
	clustered bool // the lanes are on several masters
	keys      Keys
	blockSize int64
	now       func() time.Time

	// mu is the worker's lock: a channel, so that a request waiting for
	// it gives up at its own deadline (with a sync.Mutex, requests behind
	// a block's fetch from a blackholed Redis were answered 4 s late, past
	// their 2 s deadline: the fault run).
	mu chan struct{}
	// dayStart and dayEnd bound the UTC day of the current block, so the
	// day is checked by comparing times, not formatting one per id.
	dayStart, dayEnd time.Time
	next             int64 // next counter value to hand out
	blockEnd         int64 // last counter value of the block
	lane             int   // the lane the block is of

	// identity and floor, if set (IDWorkerConfig): when Redis's incarnation
	// changes, the block in hand is dropped and the counter first rises
	// past floor's answer.
	identity  *Identity
	floor     func(ctx context.Context, dayStart time.Time, lo, hi int64) (int64, error)
	seen      string
	needFloor bool
}

// FloorMargin is added to the highest persisted sequence when the counter
// is raised: blocks other instances took before Redis forgot them, and
// orders still queued, are below it (a thousand instances' blocks of 1000).
const FloorMargin = 1_000_000

const (
	idLaneBits = 4
	idLanes    = 1 << idLaneBits
	// idLaneSize is how many counter values a lane has a day (2^28).
	idLaneSize = 1 << (32 - idLaneBits)
	// idLaneStep is how far a worker moves on when its lane fails: 5 is
	// prime to idLanes, so every lane comes in turn, and about a third of
	// the lanes away, so on a cluster of three masters most likely
	// another master's.
	idLaneStep = 5
	// idLaneTries bounds the lanes one refill tries on a cluster when they
	// fail: three, as many as the masters of the smallest cluster.
	idLaneTries = 3
)

// idLaneTags are the lanes' hash tags, spread over the slots as shards'
// are (lane 0's key has none: its slot is the key's, as before lanes).
var idLaneTags = SpreadShards(idLanes)

// counterTTL keeps a day's counter a day past its end, then Redis drops it.
const counterTTL = 48 * time.Hour

// IDWorkerConfig configures an ID worker. Zero values take the defaults.
type IDWorkerConfig struct {
	// Prefix starts the counter's key. Default DefaultPrefix.
	Prefix string
	// BlockSize is how many ids one round trip takes. Default 100; 1
	// reproduces the classic one INCR per id.
	BlockSize int64
	// Identity and Floor, set together, make the worker follow Redis's
	// incarnation: on a change (and at start, and on moving to another
	// lane) it drops its block and raises the lane's counter for the day
	// past what the database holds, Floor(dayStart, lo, hi) being the
	// highest sequence in [lo, hi] the database holds for the day (0 for
	// none), plus FloorMargin. So a Redis that forgot the counter, or went
	// back to an old snapshot, never hands out an id already used.
	Identity *Identity
	Floor    func(ctx context.Context, dayStart time.Time, lo, hi int64) (int64, error)
}

// NewIDWorker builds a worker, whole: it panics when only one of Identity
// and Floor is set (a wiring mistake, found at start).
func NewIDWorker(rdb redis.UniversalClient, cfg IDWorkerConfig) *IDWorker {
	if (cfg.Identity == nil) != (cfg.Floor == nil) {
		panic("redisreserve: NewIDWorker: set both Identity and Floor, or neither")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 100
	}
	_, clustered := rdb.(*redis.ClusterClient)
	return &IDWorker{rdb: rdb, clustered: clustered, keys: Keys{Prefix: cfg.Prefix}, blockSize: cfg.BlockSize, now: time.Now, mu: make(chan struct{}, 1),
		identity: cfg.Identity, floor: cfg.Floor, needFloor: cfg.Floor != nil}
}

// NextID implements core.IDGenerator.
func (w *IDWorker) NextID(ctx context.Context) (int64, error) {
	select {
	case w.mu <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("redisreserve: id counter: waiting for the worker: %w", ctx.Err())
	}
	defer func() { <-w.mu }()
	now := w.now().UTC()
	if w.identity != nil {
		inc, err := w.identity.Current(ctx)
		if err != nil {
			return 0, fmt.Errorf("redisreserve: id counter: %w", err)
		}
		if inc != w.seen {
			w.seen, w.needFloor = inc, true
			w.next = w.blockEnd + 1 // drop the block: its day's counter may be gone
		}
	}
	if now.Before(w.dayStart) || !now.Before(w.dayEnd) || w.next > w.blockEnd {
		if err := w.takeBlock(ctx, now); err != nil {
			return 0, err
		}
	}
	seq := int64(w.lane)<<(32-idLaneBits) | w.next
	w.next++
	return (now.Unix()-Epoch.Unix())<<32 | seq, nil
}

// takeBlock takes the next block of the day's counter from the worker's
// lane, or from another when that lane is used up, or, on a cluster,
// cannot be asked: at most idLaneTries lanes a call, since the worker's
// lock is held meanwhile (the next call goes on from the next lane). On
// one server every lane fails as the first did (a full Redis, say): it
// does not move. A block is at most what is left of a lane.
func (w *IDWorker) takeBlock(ctx context.Context, now time.Time) error {
	dayStart := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	w.next = w.blockEnd + 1 // no block in hand until one is taken
	var errs error
	failed := 0
	for range idLanes {
		floor, err := w.laneFloor(ctx, dayStart)
		if err != nil {
			return fmt.Errorf("redisreserve: id counter floor of lane %d: %w", w.lane, err)
		}
		end, err := nextIDScript.Run(ctx, w.rdb, []string{w.keys.IDLane(now, w.lane)},
			w.blockSize, int64(counterTTL/time.Second), floor).Int64()
		switch {
		case err == nil && end < idLaneSize:
			w.needFloor = false
			w.dayStart, w.dayEnd = dayStart, dayStart.AddDate(0, 0, 1)
			w.next, w.blockEnd = end-w.blockSize+1, end
			return nil
		case err == nil:
			errs = errors.Join(errs, fmt.Errorf("lane %d used up for %s", w.lane, dayStart.Format("2006-01-02")))
		default:
			errs = errors.Join(errs, fmt.Errorf("lane %d: %w", w.lane, err))
			if !w.clustered {
				return fmt.Errorf("redisreserve: id counter: %w", errs)
			}
			failed++
		}
		// Another lane — on a cluster, of another master, if one that
		// failed: what its counter holds may be older than this
		// incarnation (its master restarted while the lane was not in use).
		if err != nil {
			w.lane = w.laneOffMaster(ctx, now)
		} else {
			w.lane = (w.lane + idLaneStep) % idLanes
		}
		w.needFloor = w.floor != nil
		if failed == idLaneTries || ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("redisreserve: id counter: %w", errs)
}

// laneOffMaster is the next lane (idLaneStep on, in turn) whose key a
// master other than the worker's lane's serves, as the cluster's map of
// shards says (CLUSTER SHARDS): the lanes' slots are spread, but where
// each master's range starts is the cluster's. Without the map, the next
// lane in turn.
func (w *IDWorker) laneOffMaster(ctx context.Context, now time.Time) int {
	next := (w.lane + idLaneStep) % idLanes
	cluster, ok := w.rdb.(*redis.ClusterClient)
	if !ok {
		return next
	}
	shards, err := cluster.ClusterShards(ctx).Result()
	if err != nil {
		return next
	}
	shardOf := func(lane int) int {
		slot := int64(Slot(w.keys.IDLane(now, lane)))
		for i, sh := range shards {
			for _, r := range sh.Slots {
				if slot >= r.Start && slot <= r.End {
					return i
				}
			}
		}
		return -1
	}
	failed := shardOf(w.lane)
	for j := 1; j < idLanes; j++ {
		lane := (w.lane + j*idLaneStep) % idLanes
		if sh := shardOf(lane); sh >= 0 && sh != failed {
			return lane
		}
	}
	return next
}

// laneFloor is what the worker's lane's counter must first rise to, if it
// needs to (needFloor): past the highest sequence of the lane the database
// holds for the day.
func (w *IDWorker) laneFloor(ctx context.Context, dayStart time.Time) (int64, error) {
	if !w.needFloor || w.floor == nil {
		return 0, nil
	}
	lo := int64(w.lane) << (32 - idLaneBits)
	f, err := w.floor(ctx, dayStart, lo, lo+idLaneSize-1)
	if err != nil {
		return 0, err
	}
	return max(f-lo, 0) + FloorMargin, nil
}

var _ core.IDGenerator = (*IDWorker)(nil)
