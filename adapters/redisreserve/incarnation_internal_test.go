package redisreserve

import (
	"slices"
	"testing"
)

// TestAnIncarnationReadsBackAsWritten: what Unaffected reads of an
// incarnation is what the identity's look wrote: the run_ids and the mark.
func TestAnIncarnationReadsBackAsWritten(t *testing.T) {
	for _, c := range []struct {
		ids  []string
		mark string
		want string
	}{
		{[]string{"bb", "aa", "cc"}, "MARK7", "aa,bb,cc/MARK7"},
		{[]string{"aa"}, "", "aa"},
	} {
		inc := incarnationOf(slices.Clone(c.ids), c.mark)
		if inc != c.want {
			t.Fatalf("incarnationOf(%v, %q) = %q, want %q", c.ids, c.mark, inc, c.want)
		}
		ids, mark := incarnationParts(inc)
		if mark != c.mark || !slices.Equal(ids, slices.Sorted(slices.Values(c.ids))) {
			t.Fatalf("incarnationParts(%q) = %v, %q; want %v, %q", inc, ids, mark, c.ids, c.mark)
		}
	}
}
