package streamgroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/internal/consumername"
	"github.com/seckill-lab/seckill/core"
)

// claims holds entries the claimer took over until a consumer fetches
// them, and where the claimer's scan of the pending list stands.
type claims struct {
	mu      sync.Mutex
	pending []core.Delivery
	cursor  string // XAUTOCLAIM's next start; "" for a new scan
}

// claimBatch bounds what one claim takes over: the consumers must fetch it
// before it idles long enough to be claimed again elsewhere.
const claimBatch = 500

// claim is the claimer duty: it takes over entries idle longer than
// ClaimMinIdle from any consumer of the group (presumed dead), under the
// name of this process's consumer 0, so a restart under the same prefix
// re-reads them at once. It claims only when the previous claim has been
// fetched, and scans the whole pending list over successive runs.
func (q *Queue) claim(ctx context.Context) error {
	q.claims.mu.Lock()
	busy, start := len(q.claims.pending) > 0, q.claims.cursor
	q.claims.mu.Unlock()
	if busy {
		return nil
	}
	if start == "" {
		start = "0-0"
	}
	owner := consumername.Of(q.cfg.ConsumerPrefix, 0)
	msgs, next, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream:   q.cfg.Stream,
		Group:    q.cfg.Group,
		Consumer: owner,
		MinIdle:  q.cfg.ClaimMinIdle,
		Start:    start,
		Count:    claimBatch,
	}).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
		return q.ensureGroup(ctx)
	}
	if err != nil {
		return fmt.Errorf("streamgroup: xautoclaim: %w", err)
	}
	if next == "0-0" {
		next = ""
	}
	// An entry this process holds is being worked on, not abandoned: it
	// can only look idle if keepHeld fell behind. Never hand it out twice.
	msgs = slices.DeleteFunc(msgs, func(m redis.XMessage) bool { return q.held.contains(m.ID) })
	ds, err := q.withAttempts(ctx, owner, msgs)
	if err != nil {
		return err
	}
	q.claims.mu.Lock()
	q.claims.cursor = next
	q.claims.pending = append(q.claims.pending, ds...)
	q.claims.mu.Unlock()
	if len(ds) > 0 {
		q.log.Info("claimed idle entries from a presumed dead consumer", "owner", owner, "entries", len(ds))
	}
	return nil
}

// takeClaimed hands up to max claimed entries to a consumer.
func (q *Queue) takeClaimed(max int) []core.Delivery {
	q.claims.mu.Lock()
	defer q.claims.mu.Unlock()
	n := min(max, len(q.claims.pending))
	if n == 0 {
		return nil
	}
	ds := q.claims.pending[:n:n]
	q.claims.pending = q.claims.pending[n:]
	return ds
}
