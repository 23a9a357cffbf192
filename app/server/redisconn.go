package server

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisTarget is SECKILL_REDIS_URL parsed the go-redis way: one server
// (redis.ParseURL), a Redis Cluster given by several nodes
// (redis.ParseClusterURL, the form with addr= for the other nodes), or a
// primary found through Sentinel (redis.ParseFailoverURL, the form with
// master_name=).
type redisTarget struct {
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
	// requestPool is the URL's pool_size (0: none given).
	requestPool int
}

func parseRedisURL(s string) (redisTarget, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return redisTarget{}, fmt.Errorf("want redis://[:password@]host:port/db, a cluster's redis://host:port?addr=host2:port2&addr=…, or Sentinel's redis://sentinel:26379?master_name=name&addr=sentinel2:26379")
	}
	// ContextTimeoutEnabled: go-redis then sets each connection's read and
	// write deadlines from the request's context, not only from its own
	// ReadTimeout (3 s, and retried), so a Redis that stops answering
	// costs a request its deadline (SECKILL_REQUEST_TIMEOUT) and no more.
	var t redisTarget
	switch {
	case u.Query().Has("master_name"):
		opts, err := redis.ParseFailoverURL(s)
		if err != nil {
			return redisTarget{}, err
		}
		opts.ContextTimeoutEnabled = true
		t.failover, t.requestPool = opts, opts.PoolSize
	case u.Query().Has("addr"):
		opts, err := redis.ParseClusterURL(s)
		if err != nil {
			return redisTarget{}, err
		}
		opts.ContextTimeoutEnabled = true
		t.cluster, t.requestPool = opts, opts.PoolSize
	default:
		opts, err := redis.ParseURL(s)
		if err != nil {
			return redisTarget{}, err
		}
		opts.ContextTimeoutEnabled = true
		t.single, t.requestPool = opts, opts.PoolSize
	}
	if t.requestPool < 0 || (t.requestPool == 0 && u.Query().Has("pool_size")) {
		return redisTarget{}, fmt.Errorf("pool_size=%s: want a positive number of connections", u.Query().Get("pool_size"))
	}
	return t, nil
}

// poolSize is the connections per node a server with cfg may need: those
// for requests (the URL's pool_size, else DefaultRedisPoolSize: the
// coalesced reservations need few), and the blocking readers on top (one
// per consumer, at least one per shard), which would otherwise starve the
// requests of connections.
func poolSize(cfg Config) int {
	requests := cfg.RedisPoolSize
	if requests <= 0 {
		requests = DefaultRedisPoolSize
	}
	return requests + max(cfg.Consumers, cfg.Shards, defaultClusterShards)
}

// dialRedis connects to the target. A single node's URL that leads to a
// node of a cluster (INFO cluster says cluster_enabled:1) opens a cluster
// client from it: go-redis discovers the other nodes.
func dialRedis(ctx context.Context, t redisTarget, pool int, onConnect func(context.Context, *redis.Conn) error) (redis.UniversalClient, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if t.failover != nil {
		t.failover.PoolSize, t.failover.OnConnect = pool, onConnect
		c := redis.NewFailoverClient(t.failover)
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, false, fmt.Errorf("cannot reach the Redis primary %q through Sentinel at %s: %w",
				t.failover.MasterName, strings.Join(t.failover.SentinelAddrs, ","), err)
		}
		return c, false, nil
	}
	if t.cluster != nil {
		t.cluster.PoolSize, t.cluster.OnConnect = pool, onConnect
		c := redis.NewClusterClient(t.cluster)
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, false, fmt.Errorf("cannot reach Redis Cluster at %s: %w", strings.Join(t.cluster.Addrs, ","), err)
		}
		return c, true, nil
	}
	o := t.single
	o.PoolSize, o.OnConnect = pool, onConnect
	c := redis.NewClient(o)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, false, fmt.Errorf("cannot reach Redis at %s: %w", o.Addr, err)
	}
	// A server without the cluster section (miniredis, some Redis-speaking
	// services) is no cluster node.
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil || !strings.Contains(info, "cluster_enabled:1") {
		return c, false, nil
	}
	c.Close()
	if o.DB != 0 {
		return nil, false, &configError{"SECKILL_REDIS_URL", "", fmt.Sprintf("%s is a Redis Cluster node, and a cluster has only database 0 (the URL names %d)", o.Addr, o.DB)}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, PoolSize: pool, OnConnect: onConnect,
		ContextTimeoutEnabled: true,
	})
	if err := cc.Ping(ctx).Err(); err != nil {
		cc.Close()
		return nil, false, fmt.Errorf("cannot reach Redis Cluster through %s: %w", o.Addr, err)
	}
	return cc, true, nil
}

// OpenRedis connects to a SECKILL_REDIS_URL as the server does: one
// server, or a Redis Cluster (its cluster form, or one node's URL).
func OpenRedis(ctx context.Context, redisURL string) (redis.UniversalClient, error) {
	t, err := parseRedisURL(redisURL)
	if err != nil {
		return nil, err
	}
	c, _, err := dialRedis(ctx, t, cmp.Or(t.requestPool, DefaultRedisPoolSize), nil)
	return c, err
}
