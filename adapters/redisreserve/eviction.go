package redisreserve

import (
	"context"
	"errors"
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

// MayEvict reports whether a master may evict keys: its policy is not
// noeviction, or it did not tell (and no master told: nothing read).
func (s EvictionState) MayEvict() bool {
	if len(s.Policies) == 0 {
		return true
	}
	for _, p := range s.Policies {
		if p != "noeviction" {
			return true
		}
	}
	return false
}

// ReadEviction reads INFO memory and stats on every master: INFO, not
// CONFIG GET, which managed Redis services often disable.
func ReadEviction(ctx context.Context, rdb redis.UniversalClient) (EvictionState, error) {
	s := EvictionState{Policies: map[string]string{}}
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		memory, err := infoSection(ctx, c, "memory")
		if err != nil {
			return err
		}
		stats, err := infoSection(ctx, c, "stats")
		if err != nil {
			return err
		}
		policy, evicted := infoField(memory, "maxmemory_policy"), infoField(stats, "evicted_keys")
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

// infoSection is one section of INFO (one at a time: INFO with several
// sections needs Redis 7). A server that refuses the section (miniredis,
// some Redis-speaking services) tells nothing: "".
func infoSection(ctx context.Context, c *redis.Client, section string) (string, error) {
	info, err := c.Info(ctx, section).Result()
	var refused redis.Error
	if errors.As(err, &refused) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("redisreserve: INFO %s on %s: %w", section, c.Options().Addr, err)
	}
	return info, nil
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
