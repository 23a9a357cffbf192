// Package userlock is the classic per-user distributed lock (redsync)
// around order creation, as an option (SECKILL_USER_LOCK=1). It is not what
// makes persistence safe: the unique (user_id, voucher_id) index is, and
// the Lua script already allows one order per user. The lock costs two
// Redis round trips per distinct user of every batch; it exists so the
// comparison can measure that cost.
package userlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
)

// Store wraps an OrderStore: a batch is saved while holding the lock of
// every user in it.
type Store struct {
	inner  core.OrderStore
	rs     *redsync.Redsync
	prefix string
	expiry time.Duration
}

// New wraps inner. prefix starts the lock keys (lock:order:<user id>).
func New(inner core.OrderStore, rdb redis.UniversalClient, prefix string) *Store {
	return &Store{inner: inner, rs: redsync.New(goredis.NewPool(rdb)), prefix: prefix, expiry: 30 * time.Second}
}

// SaveOrders implements core.OrderStore.
func (s *Store) SaveOrders(ctx context.Context, orders []core.Order) (core.SaveResult, error) {
	users := make([]int64, 0, len(orders))
	for _, o := range orders {
		users = append(users, o.UserID)
	}
	// One order of locking for everyone, so two consumers holding
	// overlapping users can never wait on each other in a cycle.
	slices.Sort(users)
	users = slices.Compact(users)

	held := make([]*redsync.Mutex, 0, len(users))
	defer func() {
		for _, m := range held {
			_, _ = m.UnlockContext(context.WithoutCancel(ctx))
		}
	}()
	for _, u := range users {
		m := s.rs.NewMutex(s.prefix+"lock:order:"+strconv.FormatInt(u, 10),
			redsync.WithExpiry(s.expiry), redsync.WithTries(64))
		if err := m.LockContext(ctx); err != nil {
			return core.SaveResult{}, fmt.Errorf("userlock: lock user %d: %w", u, err)
		}
		held = append(held, m)
	}
	return s.inner.SaveOrders(ctx, orders)
}

var _ core.OrderStore = (*Store)(nil)
