package redistopology

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelSet is a primary, its replicas and three sentinels of a caller's
// own, from the machine's redis-server, on free ports in the test's
// temporary directory; everything is killed at its cleanup. Nothing is
// persisted: a primary that dies comes back, if at all, empty.
type SentinelSet struct {
	t          T
	bin, dir   string
	MasterName string
	sentinels  []int
	procs      map[int]*exec.Cmd // by port
	nodes      []int             // data nodes' ports, primary included
	// proxy, if set, stands for the first primary (StartSentinelSetBehindProxy).
	proxy   *replProxy
	primary int // the first primary's own port
}

// SentinelOptions shape a Sentinel set.
type SentinelOptions struct {
	// Replicas of the primary (at least 1). With two, a promoted replica
	// still has one to confirm its writes (WAIT 1 goes on answering).
	Replicas int
	// BehindProxy: the first primary is reached through a proxy (by the
	// replicas, the sentinels and the clients), so that FreezeReplication
	// can hold the replication stream back.
	BehindProxy bool
}

// StartSentinelSet starts a primary, one replica and three sentinels; under
// CI a missing redis-server fails the test.
func StartSentinelSet(t T) *SentinelSet { return StartSentinelSetWith(t, SentinelOptions{Replicas: 1}) }

// StartSentinelSetBehindProxy is StartSentinelSet with the first primary
// behind the proxy FreezeReplication needs.
func StartSentinelSetBehindProxy(t T) *SentinelSet {
	return StartSentinelSetWith(t, SentinelOptions{Replicas: 1, BehindProxy: true})
}

// FreezeReplication stops what the first primary sends its replicas, for
// good: from now on its writes reach no replica.
func (s *SentinelSet) FreezeReplication() {
	s.t.Helper()
	if s.proxy == nil {
		s.t.Fatal("FreezeReplication needs SentinelOptions.BehindProxy")
	}
	s.proxy.frozen.Store(true)
}

// StartSentinelSetWith starts a set shaped by o.
func StartSentinelSetWith(t T, o SentinelOptions) *SentinelSet {
	t.Helper()
	bin := redisServer(t)
	s := &SentinelSet{t: t, bin: bin, dir: t.TempDir(), MasterName: "seckill-test", procs: map[int]*exec.Cmd{}}
	t.Cleanup(func() {
		for _, c := range s.procs {
			c.Process.Kill()
			c.Wait()
		}
	})
	primary := freePort(t)
	s.nodes, s.primary = []int{primary}, primary
	s.run(primary, "--port", strconv.Itoa(primary), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir)
	announced := primary // where everyone reaches the primary
	if o.BehindProxy {
		s.proxy = startReplProxy(t, addr(primary))
		announced = s.proxy.port()
	}
	var replicas []int
	for range max(o.Replicas, 1) {
		replica := freePort(t)
		replicas = append(replicas, replica)
		s.nodes = append(s.nodes, replica)
		s.run(replica, "--port", strconv.Itoa(replica), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", s.dir, "--replicaof", "127.0.0.1", strconv.Itoa(announced))
	}
	for i := range 3 {
		port := freePort(t)
		conf := filepath.Join(s.dir, fmt.Sprintf("sentinel-%d.conf", i))
		// Quick to declare the primary down and to fail over: the caller
		// waits for it.
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
			port, s.dir, s.MasterName, announced, s.MasterName, s.MasterName, s.MasterName)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		s.run(port, conf, "--sentinel")
		s.sentinels = append(s.sentinels, port)
	}
	// The replicas in sync, and the sentinels agreeing on them.
	s.waitFor(20*time.Second, "the replicas to sync and the sentinels to see them", func() bool {
		for _, r := range replicas {
			info := s.client(r).Info(context.Background(), "replication").Val()
			if !strings.Contains(info, "master_link_status:up") {
				return false
			}
		}
		for _, p := range s.sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: addr(p)})
			seen, err := sc.Replicas(context.Background(), s.MasterName).Result()
			sc.Close()
			if err != nil || len(seen) < len(replicas) {
				return false
			}
		}
		return true
	})
	return s
}

// URL is the SECKILL_REDIS_URL in go-redis's failover form.
func (s *SentinelSet) URL() string {
	u := "redis://" + addr(s.sentinels[0]) + "?master_name=" + s.MasterName
	for _, p := range s.sentinels[1:] {
		u += "&addr=" + addr(p)
	}
	return u
}

// Primary is the port of the primary the sentinels name now.
func (s *SentinelSet) Primary() int {
	s.t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr(s.sentinels[0])})
	defer sc.Close()
	a, err := sc.GetMasterAddrByName(context.Background(), s.MasterName).Result()
	if err != nil || len(a) != 2 {
		s.t.Fatalf("sentinel: the primary's address: %v %v", a, err)
	}
	port, _ := strconv.Atoi(a[1])
	return port
}

// KillPrimary SIGKILLs the primary and waits until the sentinels have
// promoted a replica; it returns the new primary's port.
func (s *SentinelSet) KillPrimary() int {
	s.t.Helper()
	return s.WaitPromoted(s.KillPrimaryNow())
}

// KillPrimaryNow SIGKILLs the primary and returns at once, with the port
// the sentinels named it by, for WaitPromoted.
func (s *SentinelSet) KillPrimaryNow() int {
	s.t.Helper()
	old := s.Primary()
	proc := old
	if s.proxy != nil && old == s.proxy.port() {
		proc = s.primary
	}
	s.procs[proc].Process.Kill()
	s.procs[proc].Wait()
	delete(s.procs, proc)
	return old
}

// WaitPromoted waits until the sentinels name a primary other than old,
// and it says it is one; it returns its port.
func (s *SentinelSet) WaitPromoted(old int) int {
	s.t.Helper()
	var now int
	s.waitFor(30*time.Second, "the sentinels to promote the replica", func() bool {
		now = s.Primary()
		if now == old {
			return false
		}
		role := s.client(now).Info(context.Background(), "replication").Val()
		return strings.Contains(role, "role:master")
	})
	return now
}

func (s *SentinelSet) run(port int, args ...string) {
	s.t.Helper()
	c := exec.Command(s.bin, args...)
	c.Stdout, c.Stderr = nil, nil
	if err := c.Start(); err != nil {
		s.t.Fatalf("start %v: %v", args, err)
	}
	s.procs[port] = c
	s.waitFor(10*time.Second, fmt.Sprintf("port %d to answer", port), func() bool {
		return s.client(port).Ping(context.Background()).Err() == nil
	})
}

func (s *SentinelSet) client(port int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr(port), MaxRetries: -1})
	s.t.Cleanup(func() { c.Close() })
	return c
}

func (s *SentinelSet) waitFor(within time.Duration, what string, ok func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			s.t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func freePort(t T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// WaitReplicated waits until the replica has everything the primary wrote
// so far (its replication offset caught up).
func (s *SentinelSet) WaitReplicated() {
	s.t.Helper()
	primary := s.Primary()
	if s.proxy != nil && primary == s.proxy.port() {
		primary = s.primary
	}
	offset := func(port int, field string) int64 {
		for _, l := range strings.Split(s.client(port).Info(context.Background(), "replication").Val(), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		return -1
	}
	s.waitFor(10*time.Second, "the replica to catch up", func() bool {
		want := offset(primary, "master_repl_offset")
		for _, p := range s.nodes {
			if p != primary && s.procs[p] != nil && offset(p, "slave_repl_offset") >= want {
				return true
			}
		}
		return false
	})
}
