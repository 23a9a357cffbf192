package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
)

// slotGuard sees every command a client sends and remembers each script
// call whose keys lie in more than one cluster slot: what a Redis Cluster
// refuses with CROSSSLOT, and miniredis or one Redis never would.
type slotGuard struct {
	mu         sync.Mutex
	scripts    int
	violations []string
	seen       []string
}

func (g *slotGuard) check(cmd redis.Cmder) {
	args := cmd.Args()
	name := strings.ToLower(fmt.Sprint(args[0]))
	if name != "evalsha" && name != "eval" && name != "evalsha_ro" && name != "eval_ro" && name != "fcall" {
		return
	}
	if len(args) < 3 {
		return
	}
	n, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil || len(args) < 3+n {
		return
	}
	slots := map[int][]string{}
	for _, k := range args[3 : 3+n] {
		key := fmt.Sprint(k)
		slots[redisreserve.Slot(key)] = append(slots[redisreserve.Slot(key)], key)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.scripts++
	g.seen = append(g.seen, fmt.Sprint(args[3:3+n]))
	if len(slots) > 1 {
		g.violations = append(g.violations, fmt.Sprintf("%v", slots))
	}
}

func (g *slotGuard) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *slotGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.check(cmd)
		return next(ctx, cmd)
	}
}
func (g *slotGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			g.check(c)
		}
		return next(ctx, cmds)
	}
}

// TestEveryScriptCallStaysInOneSlot runs a small sale on every backend,
// with four shards and the rate limits on, over miniredis, and fails if
// any script call the server makes (reservations, releases, the ID
// worker, rate limits, the reliable list's reaper, a rebuild's fence and
// restore) names keys of two cluster slots.
func TestEveryScriptCallStaysInOneSlot(t *testing.T) {
	for _, b := range builtinBackends {
		variants := []Variant{{Name: b.Name, Configure: func(*Config) {}}}
		variants = append(variants, b.Variants...)
		for _, v := range variants {
			t.Run(v.Name, func(t *testing.T) {
				guard := &slotGuard{}
				h := startServerWith(t, "embedded", func(c *Config) {
					c.Queue, c.Shards, c.SeckillRate, c.CodeRate = b.Name, 4, 100, 100
					v.Configure(c)
				}, func(s *Server) { s.rdb.AddHook(guard) })
				status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": "13900000002"})
				if status != 200 {
					t.Fatalf("code: %d %v", status, body)
				}
				if status, body = h.do("POST", "/api/auth/login", "", map[string]any{"phone": "13900000002", "code": body["code"], "challenge": body["challenge"]}); status != 200 {
					t.Fatalf("login: %d %v", status, body)
				}
				for range 4 { // one voucher on each shard
					voucher := h.openVoucher(3)
					for u := int64(1); u <= 4; u++ {
						h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
					}
					if n := h.waitForRows(voucher, 3, 10*time.Second); n != 3 && b.Name != "pubsub" {
						t.Fatalf("voucher %d: %d rows, want 3", voucher, n)
					}
					// A rebuild's scripts (fence, restore) too.
					if status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/reconcile", h.cfg.AdminToken, nil); status != 200 {
						t.Fatalf("reconcile: %d %v", status, body)
					}
				}
				time.Sleep(200 * time.Millisecond) // a round of the queue's duties
				guard.mu.Lock()
				defer guard.mu.Unlock()
				if b.Name != "sync" && guard.scripts < 16 {
					t.Fatalf("saw %d script calls: the guard does not see the server's commands", guard.scripts)
				}
				if len(guard.violations) > 0 {
					t.Fatalf("%d of %d script calls span slots, e.g. %s", len(guard.violations), guard.scripts, guard.violations[0])
				}
			})
		}
	}
}

// TestTheSlotGuardCatchesAKeyOutsideTheShard: the guard above would see a
// backend whose queue key ignores the shards.
func TestTheSlotGuardCatchesAKeyOutsideTheShard(t *testing.T) {
	registerUntagged()
	guard := &slotGuard{}
	h := startServerWith(t, "embedded", func(c *Config) { c.Queue, c.Shards = "untagged-list", 4 },
		func(s *Server) { s.rdb.AddHook(guard) })
	// Three buyers: CI once saw the guard miss the one reservation of a
	// single buyer (11 other script calls seen, not the reservation's;
	// not reproduced in 40 runs since), and a test of the guard must not
	// hang on one call.
	voucher := h.openVoucher(3)
	for u := int64(1); u <= 3; u++ {
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil); status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
	}
	guard.mu.Lock()
	defer guard.mu.Unlock()
	if len(guard.violations) == 0 {
		t.Fatalf("%d script calls seen, none spanning slots, although the queue key has no shard tag: %v", guard.scripts, guard.seen)
	}
}
