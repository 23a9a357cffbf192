package streamgroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

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
// ClaimMinIdle from any consumer of the group (presumed dead), under this
// process's claim owner (claimOwner), and entries stranded under this
// process's own names (adoptStranded). It claims only when the previous
// claim has been fetched, and scans the whole pending list over
// successive runs.
func (q *Queue) claim(ctx context.Context) error {
	if q.claimsBusy() {
		return nil
	}
	q.claims.mu.Lock()
	start := q.claims.cursor
	q.claims.mu.Unlock()
	if adopted, err := q.adoptStranded(ctx); err != nil || adopted > 0 {
		return err
	}
	if start == "" {
		start = "0-0"
	}
	owner := q.claimOwner()
	msgs, next, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream:   q.cfg.Stream,
		Group:    q.cfg.Group,
		Consumer: owner,
		MinIdle:  q.cfg.ClaimMinIdle,
		Start:    start,
		Count:    claimBatch,
	}).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
		return q.vanished(ctx)
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

// claimsBusy reports whether claimed entries still wait for a consumer:
// nothing more is claimed until they are fetched, so none idles in the
// claims long enough to be claimed again elsewhere.
func (q *Queue) claimsBusy() bool {
	q.claims.mu.Lock()
	defer q.claims.mu.Unlock()
	return len(q.claims.pending) > 0
}

// claimOwner is the name claimed entries are pending under until a
// consumer fetches them: no consumer's own, so that a consumer re-reading
// its own pending entries never meets one that also waits in the claims.
// A restart under the same prefix adopts what it left (adoptStranded).
func (q *Queue) claimOwner() string { return q.cfg.ConsumerPrefix + "-claimed" }

// takeClaimed hands up to max claimed entries to consumer, holding them
// for it before they leave the claims: never neither held nor claimed,
// where adoptStranded would take them a second time.
func (q *Queue) takeClaimed(consumer string, max int) []core.Delivery {
	q.claims.mu.Lock()
	defer q.claims.mu.Unlock()
	n := min(max, len(q.claims.pending))
	if n == 0 {
		return nil
	}
	ds := q.claims.pending[:n:n]
	q.claims.pending = q.claims.pending[n:]
	q.held.add(consumer, ds)
	return ds
}

// strandedAfter is how long an entry pending under one of this process's
// consumers, and held by none of them, waits before it is adopted: far
// longer than a fetch takes from XREADGROUP's reply to holding it.
const strandedAfter = 2 * time.Second

// adoptStranded finds entries pending under this process's consumer names
// that no consumer here holds — delivered by an XREADGROUP whose reply was
// lost (go-redis retries a command on a broken connection, so the entries
// of the first try went unheard), or left by a consumer that closed — and
// hands them out again at once, rather than after ClaimMinIdle.
func (q *Queue) adoptStranded(ctx context.Context) (int, error) {
	adopted := 0
	for _, name := range q.held.consumers() {
		n, err := q.takeOver(ctx, name, strandedAfter)
		if err != nil {
			return adopted, err
		}
		if n > 0 {
			q.log.Warn("adopted entries pending under this process's consumers that none of them holds (a lost reply)",
				"consumer", name, "entries", n)
		}
		adopted += n
	}
	return adopted, nil
}

// takeOver claims the entries pending under name, idle at least minIdle
// and held by no consumer of this process, for the claim owner, and queues
// them for this process's consumers; it returns how many.
func (q *Queue) takeOver(ctx context.Context, name string, minIdle time.Duration) (int, error) {
	pending, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: q.cfg.Stream, Group: q.cfg.Group, Idle: minIdle,
		Start: "-", End: "+", Count: claimBatch, Consumer: name,
	}).Result()
	if isMissing(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("streamgroup: pending of %s: %w", name, err)
	}
	var ids []string
	for _, p := range pending {
		if !q.held.contains(p.ID) {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	// To the claim owner, atomically out of name's pending entries: a
	// consumer re-reading them meanwhile no longer finds them, and one
	// that read them already reset their idle time, so they stay.
	msgs, err := q.rdb.XClaim(ctx, &redis.XClaimArgs{
		Stream: q.cfg.Stream, Group: q.cfg.Group, Consumer: q.claimOwner(), MinIdle: minIdle, Messages: ids,
	}).Result()
	if err != nil {
		return 0, fmt.Errorf("streamgroup: take over the entries of %s: %w", name, err)
	}
	msgs = slices.DeleteFunc(msgs, func(m redis.XMessage) bool { return q.held.contains(m.ID) })
	ds, err := q.withAttempts(ctx, q.claimOwner(), msgs)
	if err != nil {
		return 0, err
	}
	q.claims.mu.Lock()
	q.claims.pending = append(q.claims.pending, ds...)
	q.claims.mu.Unlock()
	return len(ds), nil
}
