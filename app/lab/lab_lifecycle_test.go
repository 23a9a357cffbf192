package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

// TestTheLifecycleLabHoldsItsInvariants runs the lifecycle lab on the
// default backend, both expiry mechanisms, on the real servers: instances
// as separate processes, one SIGKILLed mid-expiry, a Redis of its own
// restarted empty. Every race must hold its invariants, and the resale
// must have sold again every unit whose buyer never paid.
func TestTheLifecycleLabHoldsItsInvariants(t *testing.T) {
	if testing.Short() {
		t.Skip("the lab runs sales")
	}
	r, ok := testenv.RealRedis(t)
	if !ok {
		t.Skipf("%s is not set: the lifecycle lab needs real servers (CI sets it)", testenv.RedisURLEnv)
	}
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	t.Setenv("SECKILL_REDIS_URL", os.Getenv(testenv.RedisURLEnv))
	t.Setenv("SECKILL_MYSQL_DSN", dsn)
	t.Setenv("SECKILL_KEY_PREFIX", r.Prefix)
	t.Setenv(childEnv, "server") // the instances the lab starts serve
	out := filepath.Join(t.TempDir(), "lifecycle.md")
	if code := RunLifecycle([]string{"-backends", "streamgroup", "-units", "20", "-race-orders", "20", "-pay-window", "2s", "-out", out}); code != 0 {
		t.Fatalf("lifecycle exited %d", code)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	rows := map[string][][]string{} // "backend | expiry" → its rows: resale, races
	for _, l := range strings.Split(text, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 || strings.TrimSpace(cells[1]) != "streamgroup" {
			continue
		}
		key := strings.TrimSpace(cells[2])
		rows[key] = append(rows[key], cells)
	}
	for _, expiry := range []string{"deadlines", "sweep"} {
		got := rows[expiry]
		if len(got) != 2 {
			t.Fatalf("streamgroup/%s: %d rows, want the resale's and the races':\n%s", expiry, len(got), text)
		}
		// | backend | expiry | never paid | expired | cancelled p50 / p99 | resold | p50 | p99 | max | unsold | shoppers | took |
		resale := got[0]
		if strings.TrimSpace(resale[3]) != "6" || strings.TrimSpace(resale[4]) != "6" || strings.TrimSpace(resale[6]) != "6" || strings.TrimSpace(resale[10]) != "0" {
			t.Errorf("streamgroup/%s resale: want 6 never paid, 6 expired, 6 resold, 0 unsold: %s", expiry, strings.Join(resale, "|"))
		}
		races := got[1][3 : len(got[1])-1]
		if len(races) != len(lifecycleRaces) {
			t.Fatalf("streamgroup/%s: %d race cells, want %d", expiry, len(races), len(lifecycleRaces))
		}
		for i, c := range races {
			if !strings.HasPrefix(strings.TrimSpace(c), "**held**") {
				t.Errorf("streamgroup/%s, %s: %s", expiry, lifecycleRaces[i], c)
			}
		}
	}
}

// TestTheLifecycleLabRefusesWhatItCannotRun: bad flags and the stand-ins
// are refused with status 2 before anything starts.
func TestTheLifecycleLabRefusesWhatItCannotRun(t *testing.T) {
	t.Setenv("SECKILL_REDIS_URL", "")
	t.Setenv("SECKILL_MYSQL_DSN", "")
	for _, args := range [][]string{{"-expiry", "later"}, {"-never-pay", "0"}, {"-pay-window", "10ms"}, {}} {
		if code := RunLifecycle(args); code != 2 {
			t.Errorf("seckill lifecycle %v: status %d, want 2", args, code)
		}
	}
}
