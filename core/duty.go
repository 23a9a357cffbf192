package core

import (
	"context"
	"sync"
	"time"
)

// Duty is one background task of a queue backend — a heartbeat, a reaper
// of dead consumers' messages, a claimer of idle ones, a trimmer — run on
// its own ticker. A backend lists all of its duties in one place
// (Capabilities.Duties); RunDuties (which the pipeline calls) starts
// them together and stops them together, when its context ends, so no duty
// outlives the pipeline or runs on a context of its own.
type Duty struct {
	// Name says what the duty does, for logs and metrics.
	Name string
	// Every is the time between two runs; the first comes one Every after
	// the start.
	Every time.Duration
	// Do runs the duty once. An error is reported, and the duty runs again
	// at the next tick.
	Do func(ctx context.Context) error
}

// RunDuties runs each duty every Every until ctx is done, then returns once
// every duty has stopped (a run in progress sees ctx end and returns).
// onError, if set, is told of each failed run.
func RunDuties(ctx context.Context, duties []Duty, onError func(d Duty, err error)) {
	var wg sync.WaitGroup
	for _, d := range duties {
		wg.Go(func() {
			t := time.NewTicker(d.Every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if err := d.Do(ctx); err != nil && ctx.Err() == nil && onError != nil {
						onError(d, err)
					}
				}
			}
		})
	}
	wg.Wait()
}

// RunQueueDuties runs q's duties, if it has any, as RunDuties does.
func RunQueueDuties(ctx context.Context, q Queue, onError func(d Duty, err error)) {
	if duties := CapabilitiesOf(q).Duties; len(duties) > 0 {
		RunDuties(ctx, duties, onError)
	}
}
