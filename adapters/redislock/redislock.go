// Package redislock is a named lock across instances (redsync over the
// server's Redis): what serialises the operators' actions on one voucher
// (core/steer's Locker).
package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// Locker takes named locks, under prefix + "lock:" + name.
type Locker struct {
	rs     *redsync.Redsync
	prefix string
}

// New locks on rdb, its keys under prefix.
func New(rdb redis.UniversalClient, prefix string) *Locker {
	return &Locker{rs: redsync.New(goredis.NewPool(rdb)), prefix: prefix}
}

// Lock takes the lock of name for at most ttl (should its holder die),
// trying until ctx is done; the release gives it back.
func (l *Locker) Lock(ctx context.Context, name string, ttl time.Duration) (func(), error) {
	m := l.rs.NewMutex(l.prefix+"lock:"+name, redsync.WithExpiry(ttl), redsync.WithTries(1<<20),
		redsync.WithRetryDelay(20*time.Millisecond))
	if err := m.LockContext(ctx); err != nil {
		return nil, fmt.Errorf("redislock: %s: %w", name, err)
	}
	return func() { _, _ = m.UnlockContext(context.WithoutCancel(ctx)) }, nil
}
