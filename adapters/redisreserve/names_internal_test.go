package redisreserve

import (
	"strconv"
	"testing"
)

// TestNamesAreKeptUpToTheBound: a name is made once while the cache has
// room, and past maxNames made per use, never kept: made-up ids cost no
// memory.
func TestNamesAreKeptUpToTheBound(t *testing.T) {
	var c nameCache[int]
	made := 0
	name := func(k int) string {
		return nameOf(&c, k, func() string { made++; return "n" + strconv.Itoa(k) })
	}
	for k := range maxNames + 10 {
		if got := name(k); got != "n"+strconv.Itoa(k) {
			t.Fatalf("name %d = %q", k, got)
		}
	}
	if n := c.n.Load(); n != maxNames {
		t.Fatalf("%d names kept, want the bound %d", n, maxNames)
	}
	made = 0
	name(7)
	name(maxNames + 5)
	if made != 1 {
		t.Errorf("made %d names again, want 1 (the one past the bound)", made)
	}
}
