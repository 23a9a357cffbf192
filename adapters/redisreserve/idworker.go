package redisreserve

import (
	"context"
	"fmt"
	"sync"
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
type IDWorker struct {
	rdb       redis.UniversalClient
	keys      Keys
	blockSize int64
	now       func() time.Time

	mu sync.Mutex
	// dayStart and dayEnd bound the UTC day of the current block, so the
	// day is checked by comparing times, not formatting one per id.
	dayStart, dayEnd time.Time
	next             int64 // next counter value to hand out
	blockEnd         int64 // last counter value of the block

	// identity and floor, if set (IDWorkerConfig): when Redis's incarnation
	// changes, the block in hand is dropped and the counter first rises
	// past floor's answer.
	identity  *Identity
	floor     func(ctx context.Context, dayStart time.Time) (int64, error)
	seen      string
	needFloor bool
}

// FloorMargin is added to the highest persisted sequence when the counter
// is raised: blocks other instances took before Redis forgot them, and
// orders still queued, are below it (a thousand instances' blocks of 1000).
const FloorMargin = 1_000_000

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
	// incarnation: on a change (and at start) it drops its block and raises
	// the day's counter past Floor(dayStart) + FloorMargin, Floor being the
	// highest counter value the database holds for the day. So a Redis
	// that forgot the counter, or went back to an old snapshot, never hands
	// out an id already used.
	Identity *Identity
	Floor    func(ctx context.Context, dayStart time.Time) (int64, error)
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
	return &IDWorker{rdb: rdb, keys: Keys{Prefix: cfg.Prefix}, blockSize: cfg.BlockSize, now: time.Now,
		identity: cfg.Identity, floor: cfg.Floor, needFloor: cfg.Floor != nil}
}

// NextID implements core.IDGenerator.
func (w *IDWorker) NextID(ctx context.Context) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
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
		dayStart := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		var floor int64
		if w.needFloor && w.floor != nil {
			f, err := w.floor(ctx, dayStart)
			if err != nil {
				return 0, fmt.Errorf("redisreserve: id counter floor: %w", err)
			}
			floor = f + FloorMargin
		}
		end, err := nextIDScript.Run(ctx, w.rdb, []string{w.keys.IDCounter(now)},
			w.blockSize, int64(counterTTL/time.Second), floor).Int64()
		if err != nil {
			return 0, fmt.Errorf("redisreserve: id counter: %w", err)
		}
		w.needFloor = false
		w.dayStart = dayStart
		w.dayEnd = w.dayStart.AddDate(0, 0, 1)
		w.next, w.blockEnd = end-w.blockSize+1, end
	}
	if w.blockEnd > 1<<32-1 {
		return 0, fmt.Errorf("redisreserve: id counter for %s exhausted", w.dayStart.Format("2006-01-02"))
	}
	seq := w.next
	w.next++
	return (now.Unix()-Epoch.Unix())<<32 | seq, nil
}

var _ core.IDGenerator = (*IDWorker)(nil)
