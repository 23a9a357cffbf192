// Package redisgate is the consumers' gate board in Redis
// (consumergate.Board): the operator's setting in one hash every instance
// reads, the instances' acks stamped with Redis's clock, and the cap's one
// rate, redis_rate's GCRA, shared by every instance.
package redisgate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/internal/consumername"
	"github.com/seckill-lab/seckill/adapters/redisrate"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

var (
	setScript  = redis.NewScript(lua.ConsumerSet)
	ackScript  = redis.NewScript(lua.ConsumerAck)
	acksScript = redis.NewScript(lua.ConsumerAcks)
)

// InstanceName names an instance's consumers in the acks: the configured
// name (SECKILL_CONSUMER_NAME) where set, else the one the queues' own
// consumers get (host, pid and a random part: the tests run several
// instances in one process).
func InstanceName(configured string) string {
	if configured != "" {
		return configured
	}
	return consumername.Default()
}

// Board is the setting, the acks and the cap in Redis.
type Board struct {
	rdb     redis.UniversalClient
	setting string
	acks    string
	limiter *redis_rate.Limiter
}

// New is the board of the deployment whose keys start with prefix.
func New(rdb redis.UniversalClient, prefix string) *Board {
	return &Board{rdb: rdb, setting: prefix + "consumers", acks: prefix + "consumers:acks",
		limiter: redisrate.NewLimiter(rdb, prefix)}
}

// Read implements consumergate.Board.
func (b *Board) Read(ctx context.Context) (core.ConsumerSetting, bool, error) {
	m, err := b.rdb.HGetAll(ctx, b.setting).Result()
	if err != nil {
		return core.ConsumerSetting{}, false, fmt.Errorf("redisgate: read the setting: %w", err)
	}
	if m["version"] == "" {
		return core.ConsumerSetting{}, false, nil
	}
	rate, err1 := strconv.Atoi(m["rate"])
	version, err2 := strconv.ParseInt(m["version"], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return core.ConsumerSetting{}, false, fmt.Errorf("redisgate: the setting %v: %w", m, err)
	}
	return core.ConsumerSetting{Paused: m["paused"] == "1", PerSecond: rate, Version: version}, true, nil
}

// Write writes s unless a later version is there (the operator's side).
func (b *Board) Write(ctx context.Context, s core.ConsumerSetting) error {
	paused := 0
	if s.Paused {
		paused = 1
	}
	if err := setScript.Run(ctx, b.rdb, []string{b.setting}, paused, s.PerSecond, s.Version).Err(); err != nil {
		return fmt.Errorf("redisgate: write the setting: %w", err)
	}
	return nil
}

// Restore implements consumergate.Board: the database's setting written
// back, unless an operator's later one got there first.
func (b *Board) Restore(ctx context.Context, s core.ConsumerSetting) error {
	return b.Write(ctx, s)
}

// Ack implements consumergate.Board.
func (b *Board) Ack(ctx context.Context, instance string, version int64) error {
	if err := ackScript.Run(ctx, b.rdb, []string{b.acks}, instance, version).Err(); err != nil {
		return fmt.Errorf("redisgate: ack: %w", err)
	}
	return nil
}

// Acks lists the instances heard from within recent and the version each
// runs (the operator's side).
func (b *Board) Acks(ctx context.Context, recent time.Duration) (map[string]int64, error) {
	flat, err := acksScript.Run(ctx, b.rdb, []string{b.acks}, recent.Milliseconds()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redisgate: read the acks: %w", err)
	}
	out := make(map[string]int64, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		v, err := strconv.ParseInt(flat[i+1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redisgate: the ack of %s: %w", flat[i], err)
		}
		out[flat[i]] = v
	}
	return out, nil
}

// capKey is the cap's rate under the prefix (redis_rate adds "rate:").
const capKey = "consumers:cap"

// Take implements consumergate.Board.
func (b *Board) Take(ctx context.Context, perSecond, burst, n int) (time.Duration, error) {
	res, err := b.limiter.AllowN(ctx, capKey, redis_rate.Limit{Rate: perSecond, Burst: burst, Period: time.Second}, n)
	if err != nil {
		return 0, fmt.Errorf("redisgate: the cap: %w", err)
	}
	if res.Allowed >= n {
		return 0, nil
	}
	if res.RetryAfter <= 0 {
		// More at once than the burst lets go: never allowed as asked.
		return 0, fmt.Errorf("redisgate: %d orders at once, over the cap's burst %d", n, burst)
	}
	return res.RetryAfter, nil
}
