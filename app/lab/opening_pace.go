package lab

import (
	"math"
	"time"
)

// stepPacer is an open-loop schedule for vegeta: arrivals at a fixed rate
// for each step in turn, whatever the answers. Hit k is due at due(k):
// when the steps' cumulative arrivals reach k, so that a request's
// latency can be counted from the moment it was meant to be sent (a slow
// answer delays no later request: no coordinated omission).
type stepPacer struct {
	rates []float64 // arrivals a second, one per step
	step  time.Duration
}

// total is how many arrivals the schedule makes.
func (p stepPacer) total() uint64 {
	var n float64
	for _, r := range p.rates {
		n += math.Floor(r * p.step.Seconds())
	}
	return uint64(n)
}

// due is when hit k is meant to be sent, from the schedule's start; false
// past its end.
func (p stepPacer) due(k uint64) (time.Duration, bool) {
	var before uint64
	for i, r := range p.rates {
		n := uint64(math.Floor(r * p.step.Seconds()))
		if k < before+n {
			at := time.Duration(float64(k-before) / r * float64(time.Second))
			return time.Duration(i)*p.step + at, true
		}
		before += n
	}
	return 0, false
}

// Pace implements vegeta.Pacer.
func (p stepPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	at, ok := p.due(hits)
	if !ok {
		return 0, true
	}
	if at <= elapsed {
		return 0, false
	}
	return at - elapsed, false
}

// Rate implements vegeta.Pacer.
func (p stepPacer) Rate(elapsed time.Duration) float64 {
	i := int(elapsed / p.step)
	if elapsed < 0 || i >= len(p.rates) {
		return 0
	}
	return p.rates[i]
}
