package redisreserve

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Identity tells which incarnation of Redis the sale runs on: the run_id of
// each master, which changes on every restart and failover, whether the new
// server came up empty or from an old snapshot. Both look the same to the
// keys; only the run_id tells them apart from a server that never went away.
//
// A restart or failover always means new connections, and OnConnect (a
// go-redis hook) reads each new connection's run_id before the connection
// is used: a run_id not seen before marks the identity stale, and the next
// Current asks every master again. So no command runs on a new incarnation
// before the sale knows of it. Servers without INFO server (miniredis) have
// the identity "".
type Identity struct {
	rdb redis.UniversalClient

	stale   atomic.Bool
	mu      sync.Mutex
	known   map[string]bool
	current atomic.Pointer[string]
}

// NewIdentity returns an identity to attach to a client (Attach) after the
// client is built with OnConnect as its hook.
func NewIdentity() *Identity {
	i := &Identity{known: map[string]bool{}}
	i.stale.Store(true)
	return i
}

// Attach gives the identity the client it asks.
func (i *Identity) Attach(rdb redis.UniversalClient) { i.rdb = rdb }

// OnConnect is the client's OnConnect hook. It never fails a connection: a
// server that cannot tell its run_id has none.
func (i *Identity) OnConnect(ctx context.Context, cn *redis.Conn) error {
	id := runID(cn.Info(ctx, "server").Val())
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.known[id] {
		i.known[id] = true
		i.stale.Store(true)
	}
	return nil
}

// Current is the identity: every master's run_id, sorted and joined.
func (i *Identity) Current(ctx context.Context) (string, error) {
	if cur := i.current.Load(); cur != nil && !i.stale.Load() {
		return *cur, nil
	}
	return i.Refresh(ctx)
}

// Refresh asks every master for its run_id now.
func (i *Identity) Refresh(ctx context.Context) (string, error) {
	i.stale.Store(false)
	var (
		mu  sync.Mutex
		ids []string
	)
	ask := func(ctx context.Context, c redis.Cmdable) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil && !strings.Contains(err.Error(), "not supported") {
			return err
		}
		mu.Lock()
		ids = append(ids, runID(info))
		mu.Unlock()
		return nil
	}
	var err error
	if c, ok := i.rdb.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return ask(ctx, node) })
	} else {
		err = ask(ctx, i.rdb)
	}
	if err != nil {
		i.stale.Store(true)
		return "", fmt.Errorf("redisreserve: identity: %w", err)
	}
	slices.Sort(ids)
	cur := strings.Join(ids, ",")
	i.current.Store(&cur)
	return cur, nil
}

func runID(info string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
			return v
		}
	}
	return ""
}
