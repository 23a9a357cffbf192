package streamgroup

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/lua"
)

var (
	beatScript = redis.NewScript(lua.ConsumerBeat)
	deadScript = redis.NewScript(lua.DeadConsumers)
)

// aliveKey is the hash of the processes' heartbeats, in the stream's slot.
func (q *Queue) aliveKey() string { return q.cfg.Stream + ":alive" }

// beat is the heartbeat duty: this process's consumers are alive for
// Liveness more (consumer_beat.lua). It runs every Liveness/3, so two
// missed beats in a row are not yet a death.
func (q *Queue) beat(ctx context.Context) error {
	if err := beatScript.Run(ctx, q.rdb, []string{q.aliveKey()}, q.cfg.ConsumerPrefix, q.cfg.Liveness.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("streamgroup: heartbeat: %w", err)
	}
	return nil
}

// claimDead is the reaper duty: it takes over, at once, the entries pending
// under the consumers of a process that stopped beating (dead_consumers.lua)
// — a killed process's orders move within Liveness and a reap, not after
// ClaimMinIdle, which a short pay window could outlast (the outside review
// saw 98 of 100 winners' orders expire still queued). An entry is never
// taken from this process's own consumers: what they hold is being worked
// on, and what they lost is adoptStranded's.
func (q *Queue) claimDead(ctx context.Context) error {
	if q.claimsBusy() {
		return nil
	}
	dead, err := deadScript.Run(ctx, q.rdb, []string{q.cfg.Stream, q.aliveKey()}, q.cfg.Group).StringSlice()
	if err != nil {
		return fmt.Errorf("streamgroup: dead consumers: %w", err)
	}
	for _, name := range dead {
		if i := strings.LastIndexByte(name, '-'); i >= 0 && name[:i] == q.cfg.ConsumerPrefix {
			continue
		}
		n, err := q.takeOver(ctx, name, 0)
		if err != nil {
			return err
		}
		if n > 0 {
			q.log.Info("claimed the entries of a consumer whose process stopped beating", "consumer", name, "entries", n)
		}
	}
	return nil
}
