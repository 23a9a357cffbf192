// Package redisrate is redis_rate's GCRA limiter with its keys under the
// deployment's key prefix: the request limits and the consumers' cap use
// it, so every key the server writes starts with SECKILL_KEY_PREFIX.
package redisrate

import (
	"context"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// NewLimiter is a redis_rate limiter over rdb whose keys start with prefix.
func NewLimiter(rdb redis.UniversalClient, prefix string) *redis_rate.Limiter {
	return redis_rate.NewLimiter(underPrefix{rdb, prefix})
}

// underPrefix is the client redis_rate gets: it puts the library's keys
// ("rate:" + ours) under SECKILL_KEY_PREFIX, which the library has no
// option for, so that every key the server writes starts with the prefix
// (a shared Redis's ACL key patterns, a cleanup by prefix).
type underPrefix struct {
	redis.UniversalClient
	prefix string
}

func (u underPrefix) keys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = u.prefix + k
	}
	return out
}

func (u underPrefix) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return u.UniversalClient.Eval(ctx, script, u.keys(keys), args...)
}

func (u underPrefix) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return u.UniversalClient.EvalSha(ctx, sha1, u.keys(keys), args...)
}

func (u underPrefix) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return u.UniversalClient.EvalRO(ctx, script, u.keys(keys), args...)
}

func (u underPrefix) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return u.UniversalClient.EvalShaRO(ctx, sha1, u.keys(keys), args...)
}

func (u underPrefix) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return u.UniversalClient.Del(ctx, u.keys(keys)...)
}
