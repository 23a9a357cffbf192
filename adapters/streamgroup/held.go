package streamgroup

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
)

// held is what this process's consumers fetched and have not acked yet:
// entry id -> the consumer name that owns it in the group. An entry held
// here is being worked on, however long the store takes (a MySQL outage
// holds a batch for as long as it lasts): the claimer must not hand it to
// another consumer, nor may another process claim it as a dead one's.
type held struct {
	mu    sync.Mutex
	owner map[string]string
	// names are this process's consumers, closed ones included: entries
	// pending under them that nobody here holds are stranded (adopt).
	names map[string]bool
}

func (h *held) register(consumer string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.names == nil {
		h.names = make(map[string]bool)
	}
	h.names[consumer] = true
}

func (h *held) consumers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.names))
	for n := range h.names {
		out = append(out, n)
	}
	return out
}

func (h *held) add(consumer string, ds []core.Delivery) {
	if len(ds) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.owner == nil {
		h.owner = make(map[string]string)
	}
	for _, d := range ds {
		h.owner[d.ID] = consumer
	}
}

func (h *held) remove(ids ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		delete(h.owner, id)
	}
}

// drop forgets what a closed consumer held: it stays pending in the group,
// for a restart under the same name or for the claimer once idle.
func (h *held) drop(consumer string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, c := range h.owner {
		if c == consumer {
			delete(h.owner, id)
		}
	}
}

func (h *held) contains(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.owner[id]
	return ok
}

func (h *held) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.owner)
}

// byConsumer is a snapshot of the held ids, per owning consumer.
func (h *held) byConsumer() map[string][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]string)
	for id, c := range h.owner {
		out[c] = append(out[c], id)
	}
	return out
}

// keepHeldInterval keeps a held entry's idle time well under ClaimMinIdle,
// the age at which any process's claimer takes it as a dead consumer's.
func (q *Queue) keepHeldInterval() time.Duration { return q.cfg.ClaimMinIdle / 3 }

// keepHeld is the duty that marks held entries as alive: XCLAIM to their
// own consumer with JUSTID resets an entry's idle time without counting a
// delivery (the heartbeat of the reliable list, per entry). An entry that
// was acked meanwhile is not pending, and XCLAIM skips it.
func (q *Queue) keepHeld(ctx context.Context) error {
	for consumer, ids := range q.held.byConsumer() {
		err := q.rdb.XClaimJustID(ctx, &redis.XClaimArgs{
			Stream: q.cfg.Stream, Group: q.cfg.Group, Consumer: consumer, MinIdle: 0, Messages: ids,
		}).Err()
		if err != nil && !isMissing(err) {
			return fmt.Errorf("streamgroup: keep %d held entries of %s: %w", len(ids), consumer, err)
		}
	}
	return nil
}
