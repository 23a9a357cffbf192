package lua_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill-lab/seckill/lua"
)

// scripts are every script in this folder (not a list that a new script
// can be left out of).
func scripts(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) < 15 {
		t.Fatalf("the scripts: %v, %v", files, err)
	}
	out := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(raw)
	}
	return out
}

// Commands the scripts may call that take no key.
var keyless = map[string]bool{"TIME": true, "INFO": true}

// Commands whose first argument is a subcommand: the key comes second.
var withSubcommand = map[string]bool{"XGROUP": true, "XINFO": true}

var callPattern = regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z]+)'\s*(?:,\s*([^,)]+))?(?:,\s*([^,)]+))?`)

// TestScriptsTakeEveryKeyFromKEYS catches the classic bug of building key
// names inside a script ('seckill:stock:' .. id): Redis Cluster cannot route
// such a script, and it hides which keys the script touches.
func TestScriptsTakeEveryKeyFromKEYS(t *testing.T) {
	for name, src := range scripts(t) {
		calls := callPattern.FindAllStringSubmatch(src, -1)
		if len(calls) == 0 {
			t.Fatalf("%s: found no redis.call", name)
		}
		// The one call whose command is not written out is seckill.lua's
		// hand-off: its key is KEYS[4] by construction, and core.Handoff's
		// Validate refuses a command that does not name it exactly once.
		dynamic := strings.Count(src, "redis.call(") + strings.Count(src, "redis.pcall(") - len(calls)
		if want := map[bool]int{true: 1, false: 0}[name == "seckill.lua" || name == "seckill_batch.lua"]; dynamic != want {
			t.Errorf("%s: %d redis.call with a computed command, want %d", name, dynamic, want)
		}
		for _, c := range calls {
			cmd, firstArg := strings.ToUpper(c[1]), strings.TrimSpace(c[2])
			if withSubcommand[cmd] {
				firstArg = strings.TrimSpace(c[3])
			}
			if keyless[cmd] {
				continue
			}
			if name == "seckill_batch.lua" && batchKeyNames[firstArg] {
				continue
			}
			// KEYS[i]: a loop over the keys a script was passed.
			if !regexp.MustCompile(`^KEYS\[(\d+|i)\]$`).MatchString(firstArg) {
				t.Errorf("%s: redis.call('%s', %s): the key must be a KEYS[i]", name, cmd, firstArg)
			}
		}
	}
	// The batch names each member's keys once, from KEYS, and passes them
	// on by name; the call's queue and deadlines keys are its first two;
	// the flush's keys are the stock keys it was passed and the deadlines
	// key.
	batch := lua.SeckillBatch
	if !strings.Contains(batch, "local stockKey, windowKey, ordersKey, limitKey = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]") ||
		!strings.Contains(batch, "local queueKey, duesKey = KEYS[1], KEYS[2]") ||
		!strings.Contains(batch, "local function voucherState(stockKey, windowKey, ordersKey)") {
		t.Error("seckill_batch.lua: its keys are not bound from KEYS where this test looks for them")
	}
}

// batchKeyNames are the names seckill_batch.lua gives the KEYS of a member.
var batchKeyNames = map[string]bool{"stockKey": true, "windowKey": true, "ordersKey": true, "limitKey": true, "duesKey": true,
	"v.window": true} // a voucher's windowKey, kept with its state

// TestScriptsDocumentKeysArgvAndReturns: each script starts with the block
// that lists its KEYS, ARGV and return values.
func TestScriptsDocumentKeysArgvAndReturns(t *testing.T) {
	for name, src := range scripts(t) {
		for _, want := range []string{"-- KEYS[1]", "-- ARGV", "-- Returns"} {
			if !strings.Contains(src, want) {
				t.Errorf("%s: header lacks %q", name, want)
			}
		}
		// A shebang line declaring the script's flags (Redis 7) comes
		// first where there is one.
		if _, body, ok := strings.Cut(src, "\n"); ok && strings.HasPrefix(src, "#!lua flags=") {
			src = body
		}
		if !strings.HasPrefix(src, "--") {
			t.Errorf("%s must start with its comment block", name)
		}
	}
}

// TestAdmitKeepsTheScriptsLimit: admit.lua and seckill_batch.lua count a
// request against the same limit as seckill.lua, so their GCRA must be the
// script's, line for line, on the same key, up to where each keeps the new
// state (admit.lua at once; the reservation scripts only if they refuse
// the request, and then with the same SET).
func TestAdmitKeepsTheScriptsLimit(t *testing.T) {
	if !strings.Contains(lua.Seckill, "redis.call('SET', KEYS[5], limitTat, 'PX', math.ceil(limitTat - now))") ||
		!strings.Contains(lua.SeckillBatch, "redis.call('SET', limitKey, limitTat, 'PX', math.ceil(limitTat - now))") {
		t.Fatal("a reservation script no longer keeps the limit state as admit.lua does")
	}
	gcra := func(name, src, endMark string) []string {
		start := strings.Index(src, "local interval = 1000 / rate")
		end := strings.Index(src, endMark)
		if start < 0 || end < start {
			t.Fatalf("%s: the GCRA block is not where this test looks for it", name)
		}
		var lines []string
		for _, l := range strings.Split(src[start:end], "\n") {
			l = strings.TrimSpace(strings.NewReplacer("KEYS[5]", "KEY", "KEYS[1]", "KEY", "limitKey", "KEY").Replace(l))
			if l != "" && !strings.HasPrefix(l, "return") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	script := gcra("seckill.lua", lua.Seckill, "limitTat = nextTat")
	admit := gcra("admit.lua", lua.Admit, "redis.call('SET', KEYS[1], nextTat, 'PX', math.ceil(nextTat - now))")
	// The batch reads a shopper's state only while one may be live (the
	// window's limitsUntil): the one line that differs.
	batchSrc := strings.Replace(lua.SeckillBatch, `local tat = now -- the state of a shopper with none live
  if now < v.limitsUntil then
    tat = tonumber(redis.call('GET', limitKey) or now)
  end`, `local tat = tonumber(redis.call('GET', limitKey) or now)`, 1)
	if batchSrc == lua.SeckillBatch {
		t.Fatal("seckill_batch.lua: its read of the limit state is not what this test expects")
	}
	batch := gcra("seckill_batch.lua", batchSrc, "return nextTat, nil")
	for name, other := range map[string][]string{"admit.lua": admit, "seckill_batch.lua": batch} {
		if strings.Join(script, "\n") != strings.Join(other, "\n") {
			t.Fatalf("%s's limit drifted from seckill.lua's:\n%s\n---\n%s", name, strings.Join(other, "\n"), strings.Join(script, "\n"))
		}
	}
}

// TestTheBatchReadsRedisClockOnce: the batch script calls TIME once per
// call, not once per member.
func TestTheBatchReadsRedisClockOnce(t *testing.T) {
	if n := strings.Count(lua.SeckillBatch, "redis.call('TIME')"); n != 1 || strings.Index(lua.SeckillBatch, "redis.call('TIME')") > strings.Index(lua.SeckillBatch, "local function reserve(") {
		t.Fatalf("the batch script calls TIME %d times, or in a member's run; want once per call", n)
	}
}
