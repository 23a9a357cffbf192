package redisreserve

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A Redis that evicts keys under memory pressure deletes a sale's state
// without restarting: the run_id stays, so Identity sees nothing, and an
// evicted buyers hash sells every earlier buyer a second unit; an evicted
// order stream loses orders answered 200. Only maxmemory-policy
// noeviction keeps a sale exact (writes then fail, and the shopper is
// answered 503). Sidekiq refuses such a Redis too.

// EvictionState is what every master says of eviction.
type EvictionState struct {
	// Policies: master address -> maxmemory_policy ("" where INFO does not
	// tell, as on miniredis).
	Policies map[string]string
	// Evicted is the sum of the masters' evicted_keys.
	Evicted int64
}

// Evicting lists the masters whose policy may evict keys, "addr (policy)".
func (s EvictionState) Evicting() []string {
	var out []string
	for addr, p := range s.Policies {
		if p != "" && p != "noeviction" {
			out = append(out, addr+" ("+p+")")
		}
	}
	sort.Strings(out)
	return out
}

// ReadEviction reads INFO memory and stats on every master: INFO, not
// CONFIG GET, which managed Redis services often disable.
func ReadEviction(ctx context.Context, rdb redis.UniversalClient) (EvictionState, error) {
	s := EvictionState{Policies: map[string]string{}}
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory", "stats").Result()
		if err != nil {
			return fmt.Errorf("redisreserve: INFO memory on %s: %w", c.Options().Addr, err)
		}
		policy, evicted := infoField(info, "maxmemory_policy"), infoField(info, "evicted_keys")
		n, _ := strconv.ParseInt(evicted, 10, 64)
		mu.Lock()
		defer mu.Unlock()
		s.Policies[c.Options().Addr] = policy
		s.Evicted += n
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		return s, fmt.Errorf("redisreserve: eviction check: unsupported client %T", rdb)
	}
	return s, err
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
