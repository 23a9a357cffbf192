package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// TestDutiesRunOnTheirTickersAndStopWithTheContext: each duty runs again
// and again, a failure is reported and the duty goes on, and RunDuties
// returns only once every duty has stopped.
func TestDutiesRunOnTheirTickersAndStopWithTheContext(t *testing.T) {
	var fast, failing, inFlight atomic.Int64
	var reported atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		core.RunDuties(ctx, []core.Duty{
			{Name: "fast", Every: 5 * time.Millisecond, Do: func(context.Context) error { fast.Add(1); return nil }},
			{Name: "failing", Every: 5 * time.Millisecond, Do: func(context.Context) error {
				failing.Add(1)
				return errors.New("down")
			}},
			{Name: "slow", Every: 5 * time.Millisecond, Do: func(ctx context.Context) error {
				inFlight.Add(1)
				defer inFlight.Add(-1)
				<-ctx.Done() // a run in progress when the stop comes
				return ctx.Err()
			}},
		}, func(d core.Duty, err error) {
			if d.Name != "failing" {
				t.Errorf("duty %s reported %v", d.Name, err)
			}
			reported.Add(1)
		})
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunDuties did not return after the context ended")
	}
	if fast.Load() < 3 || failing.Load() < 3 || reported.Load() < 3 {
		t.Fatalf("runs: fast %d, failing %d (reported %d); want each at least 3", fast.Load(), failing.Load(), reported.Load())
	}
	if inFlight.Load() != 0 {
		t.Fatal("a duty was still running after RunDuties returned")
	}
	n := fast.Load()
	time.Sleep(30 * time.Millisecond)
	if fast.Load() != n {
		t.Fatal("a duty ran after RunDuties returned")
	}
}
