package redisreserve

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

// Identity tells which incarnation of Redis the sale runs on, and is the
// one owner of that answer: everything that must notice a Redis that may
// have forgotten the sale (recovery, the answer memo, the consumers' repair,
// the ID worker's floor) compares incarnations it got here.
//
// An incarnation is the run_id of each master, which changes on every
// restart and failover, whether the new server came up empty or from an
// old snapshot (both look the same to the keys; only the run_id tells them
// apart from a server that never went away), and the mark of the last
// forgetting: a signal that part of the sale's state vanished under an
// unchanged run_id (a queue's stream or group gone, keys evicted). Forget
// writes a new mark, in Redis, so every instance sees the new incarnation
// at its next Refresh. The mark is random, not a count: a count kept on a
// master that restarted from an older snapshot could come back to a value
// it had, and pass a voucher verified before a forgetting as verified
// after it. The mark is kept on every shard as well (MarkShards).
//
// A restart or failover always means new connections, and OnConnect (a
// go-redis hook) reads each new connection's run_id before the connection
// is used: a run_id not seen before marks the identity stale, and the next
// Current asks every master again. So no command runs on a new incarnation
// before the sale knows of it. Servers without INFO server (miniredis) have
// the identity "".
//
// On a cluster one master out of reach is not a reason to distrust the
// others: a look that fails (Refresh, the server's duty's Poll) leaves the
// identity as it was, not stale, so the vouchers of the masters that answer
// go on selling. Nothing of the sale runs on the master out of reach, and
// when it comes back — restarted, or failed over — it does so on new
// connections, whose run_id OnConnect reads first. Poll also takes what the
// masters in reach say (a restart, a forgetting) while one is not. On one
// Redis a failed look still marks the identity stale: nothing runs without
// it anyway, and a server behind a proxy can come back under connections
// that stayed open.
type Identity struct {
	rdb redis.UniversalClient
	// forgets is the key of the last forgetting's mark.
	forgets string

	// shardMarks are the keys of the mark kept on each shard
	// (Keys.ShardForgets), which Forget writes too.
	shardMarks []string

	stale atomic.Bool
	mu    sync.Mutex
	known map[string]bool
	// unseen are the run_ids OnConnect met first since the last look that
	// succeeded: a look that read them all leaves the identity fresh.
	unseen map[string]bool
	// runIDs is the run_id each master had at the last look that reached
	// it, by address; forgotten, the last forgetting's mark read.
	runIDs    map[string]string
	forgotten string
	current   atomic.Pointer[string]
	// refreshing shares one look between the requests that find the
	// identity stale together.
	refreshing singleflight.Group
}

// NewIdentity returns the identity of the sale under prefix, to attach to
// a client (Attach) after the client is built with OnConnect as its hook.
func NewIdentity(prefix string) *Identity {
	i := &Identity{known: map[string]bool{}, unseen: map[string]bool{}, runIDs: map[string]string{}, forgets: Keys{Prefix: prefix}.Forgets()}
	i.stale.Store(true)
	return i
}

// MarkShards gives the identity the keys of the forgetting mark kept on
// each shard (Keys.ShardForgets), which Forget writes before the sale's
// own: a script that carries a voucher's state over to a new incarnation
// compares the mark on the voucher's master with the one its state was
// written under (reverify_voucher.lua).
func (i *Identity) MarkShards(keys []string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, k := range keys {
		if !slices.Contains(i.shardMarks, k) {
			i.shardMarks = append(i.shardMarks, k)
		}
	}
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
		i.known[id], i.unseen[id] = true, true
		i.stale.Store(true)
	}
	return nil
}

// Current is the identity: every master's run_id, sorted and joined.
func (i *Identity) Current(ctx context.Context) (string, error) {
	if cur := i.current.Load(); cur != nil && !i.stale.Load() {
		return *cur, nil
	}
	cur, err, _ := i.refreshing.Do("", func() (any, error) { return i.Refresh(ctx) })
	if err != nil {
		return "", err
	}
	return cur.(string), nil
}

// Forget records that part of the sale's state vanished under this
// incarnation: the incarnation changes, here at once and on every other
// instance at its next Refresh, so every voucher is verified again before
// its next use, and those of the shards the loss touched are rebuilt.
// where names those shards by their marks' keys (Keys.ShardForgets: a
// queue's stream is one shard's); none, every shard (evicted keys could be
// anyone's). It returns the new incarnation.
func (i *Identity) Forget(ctx context.Context, where ...string) (string, error) {
	mark := rand.Text()
	shards := where
	if len(shards) == 0 {
		i.mu.Lock()
		shards = slices.Clone(i.shardMarks)
		i.mu.Unlock()
	}
	// The shards' marks first: a voucher checked between the two writes
	// is rebuilt, never carried over.
	if _, err := i.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range shards {
			p.Set(ctx, k, mark, 0)
		}
		return nil
	}); err != nil {
		return "", fmt.Errorf("redisreserve: identity: forget: %w", err)
	}
	if err := i.rdb.Set(ctx, i.forgets, mark, 0).Err(); err != nil {
		return "", fmt.Errorf("redisreserve: identity: forget: %w", err)
	}
	return i.Refresh(ctx)
}

// Refresh asks every master for its run_id, and Redis for the mark of the
// last forgetting, now: it fails if any master does not answer.
func (i *Identity) Refresh(ctx context.Context) (string, error) { return i.look(ctx, false) }

// Poll is Refresh for a look every so often (the server's identity duty):
// on a cluster, a master that does not answer is taken to be the one last
// seen (see Identity), so what the others say is not lost for it.
func (i *Identity) Poll(ctx context.Context) (string, error) { return i.look(ctx, true) }

func (i *Identity) look(ctx context.Context, partial bool) (string, error) {
	wasStale := i.stale.Swap(false)
	var (
		mu     sync.Mutex
		runIDs = map[string]string{}
		failed = map[string]error{}
	)
	ask := func(ctx context.Context, addr string, c redis.Cmdable) {
		info, err := c.Info(ctx, "server").Result()
		mu.Lock()
		defer mu.Unlock()
		if err != nil && !strings.Contains(err.Error(), "not supported") {
			failed[addr] = err
			return
		}
		runIDs[addr] = runID(info)
	}
	cluster, clustered := i.rdb.(*redis.ClusterClient)
	var err error
	if clustered {
		err = cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			ask(ctx, node.Options().Addr, node)
			return nil
		})
	} else {
		ask(ctx, "", i.rdb)
	}
	forgets, ferr := i.rdb.Get(ctx, i.forgets).Result()
	if errors.Is(ferr, redis.Nil) {
		ferr = nil
	}

	i.mu.Lock()
	defer i.mu.Unlock()
	if err == nil && len(failed) > 0 && clustered && partial && !wasStale {
		for addr := range failed {
			if id, ok := i.runIDs[addr]; ok {
				runIDs[addr] = id
				delete(failed, addr)
			}
		}
		if ferr != nil {
			forgets, ferr = i.forgotten, nil
		}
	}
	for addr, e := range failed {
		err = errors.Join(err, fmt.Errorf("%s: %w", addr, e))
	}
	if err != nil || ferr != nil {
		if wasStale || !clustered {
			i.stale.Store(true)
		}
		if ferr != nil {
			return "", fmt.Errorf("redisreserve: identity: forgettings: %w", ferr)
		}
		return "", fmt.Errorf("redisreserve: identity: %w", err)
	}
	i.runIDs, i.forgotten = runIDs, forgets
	ids := make([]string, 0, len(runIDs))
	for _, id := range runIDs {
		ids = append(ids, id)
		i.known[id] = true
	}
	// A connection opened during this look to a master it read (its first
	// connections, say) need not make it look again; any other run_id met
	// since does, once.
	covered := true
	for id := range i.unseen {
		covered = covered && slices.Contains(ids, id)
	}
	clear(i.unseen)
	if covered {
		i.stale.Store(false)
	}
	cur := incarnationOf(ids, forgets)
	i.current.Store(&cur)
	return cur, nil
}

// incarnationOf writes an incarnation: the masters' run_ids, sorted and
// joined, then the last forgetting's mark, if any.
func incarnationOf(runIDs []string, mark string) string {
	slices.Sort(runIDs)
	inc := strings.Join(runIDs, ",")
	if mark != "" {
		inc += "/" + mark
	}
	return inc
}

// incarnationParts reads what incarnationOf wrote.
func incarnationParts(inc string) (runIDs []string, mark string) {
	ids, mark, _ := strings.Cut(inc, "/")
	return strings.Split(ids, ","), mark
}

func runID(info string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
			return v
		}
	}
	return ""
}
