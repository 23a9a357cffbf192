package redistopology

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of a caller's own: three masters, no
// replicas, each owning a third of the slots (what `redis-cli --cluster
// create` makes), killed when the caller ends.
type Cluster struct {
	Nodes []*RedisProcess
}

// StartCluster starts three cluster-enabled redis-servers and joins them
// with redis-cli (which must be on the machine beside redis-server).
func StartCluster(t T) *Cluster {
	t.Helper()
	return startCluster(t, false)
}

// StartPartialCoverageCluster is StartCluster with
// cluster-require-full-coverage off: when a master is down, the others go
// on serving their slots for good, not only until the cluster marks it
// failed (the node timeout, 5 s here).
func StartPartialCoverageCluster(t T) *Cluster {
	t.Helper()
	return startCluster(t, false, "--cluster-require-full-coverage", "no")
}

// StartDurableCluster is StartCluster with nodes that keep every write
// they answered (as StartDurableRedisProcess): a node's Restart loses
// nothing, and still makes a new run_id the sale must verify against.
func StartDurableCluster(t T) *Cluster {
	t.Helper()
	return startCluster(t, true)
}

func startCluster(t T, durable bool, extra ...string) *Cluster {
	t.Helper()
	bin := redisServer(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli is not on this machine; a cluster needs it")
	}
	c := &Cluster{}
	var addrs []string
	for range 3 {
		p := &RedisProcess{t: t, bin: bin, dir: t.TempDir(), Port: freePort(t), durable: durable,
			extra: append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"}, extra...)}
		p.start()
		t.Cleanup(p.kill)
		c.Nodes = append(c.Nodes, p)
		addrs = append(addrs, addr(p.Port))
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, out)
	}
	c.WaitHealthy(t)
	return c
}

// WaitHealthy waits until every node says the cluster is whole
// (cluster_state:ok): after it formed, or after a node restarted.
func (c *Cluster) WaitHealthy(t T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range c.Nodes {
		node := redis.NewClient(&redis.Options{Addr: addr(p.Port)})
		for {
			info, _ := node.ClusterInfo(context.Background()).Result()
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				node.Close()
				t.Fatal(fmt.Errorf("the cluster's node on port %d did not reach cluster_state:ok", p.Port))
			}
			time.Sleep(50 * time.Millisecond)
		}
		node.Close()
	}
}

// Owner is the index in Nodes of the master serving key: the one node
// that answers a command on it rather than redirecting (MOVED).
func (c *Cluster) Owner(t T, key string) int {
	t.Helper()
	for i, p := range c.Nodes {
		node := redis.NewClient(&redis.Options{Addr: addr(p.Port)})
		err := node.Exists(context.Background(), key).Err()
		node.Close()
		if err == nil {
			return i
		}
	}
	t.Fatalf("no node of the cluster serves %s", key)
	return -1
}

// URL is go-redis's cluster URL of the nodes (SECKILL_REDIS_URL).
func (c *Cluster) URL() string {
	u := "redis://127.0.0.1:" + strconv.Itoa(c.Nodes[0].Port)
	for i, p := range c.Nodes[1:] {
		u += map[bool]string{true: "?", false: "&"}[i == 0] + "addr=" + addr(p.Port)
	}
	return u
}
