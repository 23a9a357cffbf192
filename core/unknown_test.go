package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ceilingTest is an UnknownVouchers over a database whose highest voucher
// is highest, on a clock the test moves; reads and finds are counted.
type ceilingTest struct {
	u              *UnknownVouchers
	clock          *clock
	highest        atomic.Int64
	reads, finds   atomic.Int32
	readGate       chan struct{} // when set, a read waits for it
	existing       map[int64]bool
	existingLocked sync.Mutex
}

func newCeilingTest(highest int64) *ceilingTest {
	ct := &ceilingTest{clock: &clock{t: time.Unix(1_800_000_000, 0)}, existing: map[int64]bool{}}
	ct.highest.Store(highest)
	for id := int64(1); id <= highest; id++ {
		ct.existing[id] = true
	}
	ct.u = NewUnknownVouchers(DefaultUnknownLifetime, func(context.Context) (int64, error) {
		ct.reads.Add(1)
		if ct.readGate != nil {
			<-ct.readGate
		}
		return ct.highest.Load(), nil
	})
	ct.u.now = ct.clock.now
	return ct
}

func (ct *ceilingTest) find(ctx context.Context, id int64) (Voucher, error) {
	ct.finds.Add(1)
	ct.existingLocked.Lock()
	defer ct.existingLocked.Unlock()
	if ct.existing[id] {
		return Voucher{ID: id}, nil
	}
	return Voucher{}, ErrVoucherNotFound
}

// TestIDsAboveTheHighestVoucherAreUnknownWithoutALookUp: 300 made-up ids
// above the highest voucher, 50 at a time, cost one read of the highest id
// and no look-up; an id at or below it is looked up as before.
func TestIDsAboveTheHighestVoucherAreUnknownWithoutALookUp(t *testing.T) {
	ct := newCeilingTest(40)
	ct.readGate = make(chan struct{})
	var wg sync.WaitGroup
	var unknown atomic.Int32
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := ct.u.Find(context.Background(), 1000+int64(i), ct.find); errors.Is(err, ErrVoucherNotFound) {
				unknown.Add(1)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond) // the crowd waits on the one read
	close(ct.readGate)
	wg.Wait()
	if unknown.Load() != 300 || ct.reads.Load() != 1 || ct.finds.Load() != 0 {
		t.Fatalf("300 ids above the highest: %d unknown, %d reads of the highest, %d look-ups; want 300, 1, 0",
			unknown.Load(), ct.reads.Load(), ct.finds.Load())
	}
	if !ct.u.Unknown(1000) {
		t.Error("Unknown(1000) is false under a fresh ceiling of 40")
	}
	if v, err := ct.u.Find(context.Background(), 40, ct.find); err != nil || v.ID != 40 || ct.finds.Load() != 1 {
		t.Fatalf("the highest voucher: %v %v after %d look-ups", v, err, ct.finds.Load())
	}
}

// TestTheCeilingRisesWithEveryVoucherCreated: a voucher created here or
// nudged from elsewhere (Forget) is found at once; one whose nudge was lost
// is found once the ceiling is older than its lifetime; a reconnect of the
// nudge channel (Clear) reads the ceiling again before it refuses anything.
func TestTheCeilingRisesWithEveryVoucherCreated(t *testing.T) {
	ctx := context.Background()
	ct := newCeilingTest(40)
	if _, err := ct.u.Find(ctx, 41, ct.find); !errors.Is(err, ErrVoucherNotFound) {
		t.Fatalf("41 before it exists: %v", err)
	}
	create := func(id int64) {
		ct.existingLocked.Lock()
		ct.existing[id] = true
		ct.existingLocked.Unlock()
		ct.highest.Store(max(ct.highest.Load(), id))
	}
	create(41)
	ct.u.Forget(41)
	if _, err := ct.u.Find(ctx, 41, ct.find); err != nil {
		t.Fatalf("41 after its creation was told: %v", err)
	}
	create(42) // its nudge is lost
	if _, err := ct.u.Find(ctx, 42, ct.find); !errors.Is(err, ErrVoucherNotFound) {
		t.Fatalf("42 within the ceiling's lifetime: %v, want still unknown (the bound the contract allows)", err)
	}
	ct.clock.t = ct.clock.t.Add(DefaultUnknownLifetime)
	if _, err := ct.u.Find(ctx, 42, ct.find); err != nil {
		t.Fatalf("42 once the ceiling is a lifetime old: %v", err)
	}
	create(43)
	ct.u.Clear()
	reads := ct.reads.Load()
	if ct.u.Unknown(43) {
		t.Fatal("Unknown(43) right after a Clear: the stale ceiling still refuses")
	}
	if _, err := ct.u.Find(ctx, 43, ct.find); err != nil || ct.reads.Load() != reads+1 {
		t.Fatalf("43 after a Clear: %v, %d reads (want one more)", err, ct.reads.Load()-reads)
	}
}
