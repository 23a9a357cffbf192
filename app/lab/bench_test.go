package lab

import (
	"math"
	"testing"
)

// TestPairedRatio: the bench's ratios are the median of per-round ratios,
// not a ratio of medians, which can pair a fast round of one side with a
// slow round of the other.
func TestPairedRatio(t *testing.T) {
	endpoint, bare := []float64{120, 60, 100}, []float64{100, 70, 50}
	if got := pairedRatio(endpoint, bare); math.Abs(got-1.2) > 1e-9 {
		t.Fatalf("paired ratio %.3f, want the median round's 1.2", got)
	}
	if ofMedians := medianOf(endpoint) / medianOf(bare); math.Abs(ofMedians-1.2) < 0.1 {
		t.Fatalf("the example does not tell the two statistics apart (%.3f)", ofMedians)
	}
}
