package core

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingHolder holds orders 1 and 2 of every voucher, slowly, counting
// its looks.
type countingHolder struct{ looks atomic.Int64 }

func (h *countingHolder) HeldOrders(context.Context, int64) ([]Order, error) {
	h.looks.Add(1)
	time.Sleep(20 * time.Millisecond)
	return []Order{{ID: 1}, {ID: 2}}, nil
}

// TestACrowdReadingHeldOrdersSharesALook: 200 concurrent reads while the
// database is down cost one scan of the queue, not 200; a look is reused
// for heldReuse and then taken again; without a holder nothing is queued.
func TestACrowdReadingHeldOrdersSharesALook(t *testing.T) {
	h := &countingHolder{}
	r := newHeldReads(h)
	var wg sync.WaitGroup
	var yes atomic.Int64
	for i := range 200 {
		wg.Go(func() {
			if r.queued(context.Background(), 7, int64(1+i%3)) { // orders 1, 2 held; 3 not
				yes.Add(1)
			}
		})
	}
	wg.Wait()
	if n := h.looks.Load(); n != 1 {
		t.Fatalf("200 concurrent reads took %d looks, want 1", n)
	}
	if want := int64(134); yes.Load() != want {
		t.Fatalf("%d reads found their order held, want %d", yes.Load(), want)
	}
	r.now = func() time.Time { return time.Now().Add(heldReuse) }
	r.queued(context.Background(), 7, 1)
	if n := h.looks.Load(); n != 2 {
		t.Fatalf("a read after the reuse time: %d looks in all, want 2", n)
	}
	if newHeldReads(nil).queued(context.Background(), 7, 1) {
		t.Fatal("without a holder an order read as held")
	}
}
