package payreconcile_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/payreconcile"
)

type listed struct{ payments []core.Payment }

func (l listed) AfterSale(context.Context, time.Time, time.Time, int) ([]core.Payment, error) {
	return []core.Payment{{ID: "a"}, {ID: "d"}}, nil
}

func (l listed) Unsettled(_ context.Context, since, before time.Time, limit int) ([]core.Payment, error) {
	if !since.Before(before) {
		return nil, errors.New("since must be before before")
	}
	return l.payments[:min(limit, len(l.payments))], nil
}

// slowAsker takes a while per question and counts them, failing those
// whose id is "bad".
type slowAsker struct {
	asked atomic.Int64
	mu    sync.Mutex
	ids   map[string]int
}

func (a *slowAsker) Ask(_ context.Context, p core.Payment) (core.NoticeResult, core.ProviderPayment, error) {
	a.asked.Add(1)
	a.mu.Lock()
	a.ids[p.ID]++
	a.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	if p.ID == "bad" {
		return "", core.ProviderPayment{}, errors.New("provider down")
	}
	return core.NoticePaid, core.ProviderPayment{}, nil
}

// oneLock is a lock in memory, as the instances share Redis's.
type oneLock struct{ held atomic.Bool }

func (l *oneLock) Lock(ctx context.Context, _ string, _ time.Duration) (func(), error) {
	for !l.held.CompareAndSwap(false, true) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return func() { l.held.Store(false) }, nil
}

type counts struct {
	mu     sync.Mutex
	by     map[core.NoticeResult]int
	failed int
}

func (c *counts) Reconciled(res core.NoticeResult, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if failed {
		c.failed++
		return
	}
	c.by[res]++
}

// TestOneInstanceAtATimeAsksEachPaymentAtTheRate: three instances run a
// round at once over the same four payments unsettled and two of a sale
// ended (one of them among the four): one asks each once, the
// others skip; the questions keep to the rate; a failure is reported with
// the round's error and counted.
func TestOneInstanceAtATimeAsksEachPaymentAtTheRate(t *testing.T) {
	store := listed{payments: []core.Payment{{ID: "a"}, {ID: "b"}, {ID: "bad"}, {ID: "c"}}}
	asker := &slowAsker{ids: map[string]int{}}
	lock := &oneLock{}
	obs := &counts{by: map[core.NoticeResult]int{}}
	var errs [3]error
	start := time.Now()
	var wg sync.WaitGroup
	for i := range errs {
		r := payreconcile.New(payreconcile.Config{Store: store, Asker: asker, Locker: lock, PerSecond: 20, Observer: obs})
		wg.Go(func() { errs[i] = r.Round(context.Background()) })
	}
	wg.Wait()
	took := time.Since(start)
	if asker.asked.Load() != 5 || len(asker.ids) != 5 {
		t.Fatalf("%d questions %v, want each of the 4 unsettled payments and the one more of a sale ended asked once", asker.asked.Load(), asker.ids)
	}
	failedRounds := 0
	for _, err := range errs {
		if err != nil {
			failedRounds++
		}
	}
	if failedRounds != 1 || obs.failed != 1 || obs.by[core.NoticePaid] != 4 {
		t.Fatalf("rounds %v, observed %v and %d failures; want the one round that ran to report its one failure", errs, obs.by, obs.failed)
	}
	// 5 questions at 20 a second, a burst of 1: at least 4 waits of 50 ms.
	if took < 200*time.Millisecond {
		t.Fatalf("5 questions in %v: faster than 20 a second", took)
	}
}
