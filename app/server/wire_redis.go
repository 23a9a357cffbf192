package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
)

func (s *Server) connectRedis(ctx context.Context) error {
	if s.cfg.EmbeddedRedis() {
		s.mini = miniredis.NewMiniRedis()
		if err := s.mini.Start(); err != nil {
			return fmt.Errorf("embedded redis: %w", err)
		}
		// Without it miniredis never expires keys on its own.
		s.mini.ClockTTL(true)
		s.identity = redisreserve.NewIdentity(s.cfg.KeyPrefix)
		s.rdb = redis.NewClient(&redis.Options{Addr: s.mini.Addr(), PoolSize: poolSize(s.cfg), OnConnect: s.identity.OnConnect})
		s.identity.Attach(s.rdb)
		return nil
	}
	target, err := parseRedisURL(s.cfg.RedisURL)
	if err != nil {
		return &configError{"SECKILL_REDIS_URL", redactURL(s.cfg.RedisURL), err.Error()}
	}
	s.identity = redisreserve.NewIdentity(s.cfg.KeyPrefix)
	s.rdb, s.clustered, err = dialRedis(ctx, target, poolSize(s.cfg), s.identity.OnConnect)
	if err == nil {
		s.identity.Attach(s.rdb)
	}
	if s.clustered {
		s.log.Info("connected to a Redis Cluster")
	}
	if err != nil {
		return err
	}
	return s.checkEviction(ctx)
}

// forgotten is what a queue calls when its Redis state vanished under an
// unchanged Redis (Deps.Forgotten): the incarnation changes, on every
// instance, so every voucher is rebuilt before its next use.
func (s *Server) forgotten() {
	s.forget("a queue's stream or group vanished")
}

// forgottenOn is forgotten for the queue of one shard: only the vouchers
// of that shard are rebuilt (the others are carried over to the new
// incarnation as they are: Reverify).
func (s *Server) forgottenOn(shards core.Shards, shard int) func() {
	mark := redisreserve.Keys{Prefix: s.cfg.KeyPrefix, Shards: shards}.ShardForgets(shard)
	return func() { s.forget("a queue's stream or group vanished", mark) }
}

// forget tells the incarnation's owner that part of the sale's state
// vanished under an unchanged run_id: on the shards whose marks are where
// (Keys.ShardForgets), or on any.
func (s *Server) forget(why string, where ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	inc, err := s.identity.Forget(ctx, where...)
	if err != nil {
		s.log.Error("could not record that Redis forgot part of the sale; vouchers are verified again at Redis's next incarnation only", "why", why, "err", err)
		return
	}
	s.log.Warn("Redis forgot part of the sale: every voucher is verified again before its next use, and those it held rebuilt", "why", why, "incarnation", inc, "shard_marks", where)
}

// checkEviction refuses a Redis that may evict the sale's keys, unless the
// operator allows it (SECKILL_REDIS_ALLOW_EVICTION=1).
func (s *Server) checkEviction(ctx context.Context) error {
	st, err := redisreserve.ReadEviction(ctx, s.rdb)
	if err != nil {
		return err
	}
	s.eviction.Store(&st)
	s.metrics.redisEvicted.Set(float64(st.Evicted))
	s.metrics.redisEvicting.Set(float64(len(st.Evicting())))
	evicting := st.Evicting()
	switch {
	case len(evicting) == 0:
		return nil
	case s.cfg.AllowEviction:
		s.log.Warn("Redis may evict the sale's keys (SECKILL_REDIS_ALLOW_EVICTION=1): an eviction loses state the server cannot always rebuild",
			"masters", strings.Join(evicting, ", "))
		return nil
	}
	return fmt.Errorf("maxmemory-policy of %s lets Redis evict the sale's keys, which loses orders and sells units twice; "+
		"set it to noeviction, or SECKILL_REDIS_ALLOW_EVICTION=1 to start anyway", strings.Join(evicting, ", "))
}
