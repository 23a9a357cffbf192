package streamgroup

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/lua"
)

var pruneScript = redis.NewScript(lua.PruneConsumers)

// prune is the pruner duty: it removes the group's consumers that hold no
// pending entry and have been idle longer than ClaimMinIdle — the names of
// processes that are gone. Without it every pod a deployment ever rolled
// stays listed in the group for ever (XINFO CONSUMERS grows, and so does
// every tool that reads it). A consumer with entries pending stays until
// the claimer has taken them, and one whose process beats is never
// removed: Redis 7.0 counts no empty blocking read as a consumer's
// interaction, so a live consumer of a quiet stream looks idle (the
// pruner removed the server's own live consumers every 30 s). One of an
// older version that does not beat, pruned while idle, is created again
// by its next read (prune_consumers.lua checks and removes in one step,
// so none is removed holding an entry).
func (q *Queue) prune(ctx context.Context) error {
	gone, err := pruneScript.Run(ctx, q.rdb, []string{q.cfg.Stream, q.aliveKey()}, q.cfg.Group, q.cfg.ClaimMinIdle.Milliseconds()).StringSlice()
	if err != nil {
		return fmt.Errorf("streamgroup: prune consumers: %w", err)
	}
	if len(gone) > 0 {
		q.log.Info("removed consumers that were gone (nothing pending, idle past the claim time)", "consumers", gone)
	}
	return nil
}
