package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

// fakeStore persists into a map, failing the first failures calls and
// rejecting orders of voucher rejectVoucher.
type fakeStore struct {
	mu            sync.Mutex
	rows          map[int64]core.Order
	calls         int
	failures      int
	rejectVoucher int64
	// rejectKind is the kind of anomaly rejections carry.
	rejectKind core.DeadLetterReason
}

func (s *fakeStore) SaveOrders(_ context.Context, orders []core.Order) (core.SaveResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.failures {
		return core.SaveResult{}, errors.New("database is down")
	}
	if s.rows == nil {
		s.rows = map[int64]core.Order{}
	}
	var res core.SaveResult
	for _, o := range orders {
		switch {
		case o.VoucherID == s.rejectVoucher:
			res.Rejected = append(res.Rejected, core.Rejection{Order: o, Kind: s.rejectKind, Reason: "refused"})
		case s.rows[o.ID] != (core.Order{}):
			res.Duplicates++
		default:
			s.rows[o.ID] = o
			res.Created++
		}
	}
	return res, nil
}

func (s *fakeStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

func body(id, voucher int64) []byte {
	return core.EncodeOrder(core.Order{ID: id, UserID: id, VoucherID: voucher, CreatedAt: time.Now()})
}

func fastConfig() core.PipelineConfig {
	return core.PipelineConfig{Consumers: 1, BatchSize: 10, MaxDeliveries: 3,
		RetryInitial: time.Millisecond, RetryMax: 5 * time.Millisecond}
}

func handle(p *core.Pipeline, q *queuetest.Acked) {
	ds, _ := q.Fetch(context.Background(), 100)
	p.Handle(context.Background(), q, ds)
}

func TestPoisonMessageIsDeadLetteredAndTheBatchMovesOn(t *testing.T) {
	q, s := queuetest.NewAcked(), &fakeStore{}
	q.Push(body(1, 1), 1)
	q.Push([]byte(`{"not":"an order"}`), 1)
	q.Push([]byte(`garbage`), 1)
	q.Push(body(2, 1), 1)
	handle(core.NewPipeline(q, s, fastConfig(), nil, nil), q)

	ready, pending, acked, dead := q.State()
	if s.count() != 2 || acked != 2 || dead != 2 || pending != 0 || ready != 0 {
		t.Fatalf("persisted=%d acked=%d dead=%d pending=%d: want the 2 orders persisted and acked, the 2 poison messages dead-lettered",
			s.count(), acked, dead, pending)
	}
}

// TestBothOrderBodiesArePersisted: in a rolling upgrade a queue holds
// orders in the JSON (version 1) and the compact body (version 2); a
// consumer persists both, the same orders.
func TestBothOrderBodiesArePersisted(t *testing.T) {
	q, s := queuetest.NewAcked(), &fakeStore{}
	created := time.UnixMilli(1795941009284).UTC()
	for id := int64(1); id <= 4; id++ {
		f := core.OrderBodyJSON
		if id%2 == 0 {
			f = core.OrderBodyCompact
		}
		q.Push(f.Encode(core.Order{ID: id, UserID: 10 + id, VoucherID: 7, CreatedAt: created}), 1)
	}
	handle(core.NewPipeline(q, s, fastConfig(), nil, nil), q)
	if _, _, acked, dead := q.State(); acked != 4 || dead != 0 {
		t.Fatalf("acked %d, dead %d: want all 4 acked", acked, dead)
	}
	for id := int64(1); id <= 4; id++ {
		if got := s.rows[id]; got.UserID != 10+id || got.VoucherID != 7 || !got.CreatedAt.Equal(created) {
			t.Errorf("order %d persisted as %+v", id, got)
		}
	}
}

func TestMessageDeliveredTooOftenIsDeadLetteredUnprocessed(t *testing.T) {
	q, s := queuetest.NewAcked(), &fakeStore{}
	q.Push(body(1, 1), 4) // MaxDeliveries is 3
	q.Push(body(2, 1), 3)
	handle(core.NewPipeline(q, s, fastConfig(), nil, nil), q)
	if _, ok := s.rows[1]; ok {
		t.Fatal("the message past MaxDeliveries was persisted")
	}
	if _, ok := s.rows[2]; !ok {
		t.Fatal("the message at MaxDeliveries was not persisted")
	}
	if _, _, _, dead := q.State(); dead != 1 {
		t.Fatalf("dead = %d, want 1", dead)
	}
}

func TestStoreFailuresAreRetriedAndNothingIsAckedBeforeTheCommit(t *testing.T) {
	q, s := queuetest.NewAcked(), &fakeStore{failures: 3}
	q.Push(body(1, 1), 1)
	q.Push(body(2, 1), 1)
	handle(core.NewPipeline(q, s, fastConfig(), nil, nil), q)
	if s.calls != 4 || s.count() != 2 {
		t.Fatalf("store calls=%d rows=%d, want 4 calls (3 failures) and 2 rows", s.calls, s.count())
	}
	if _, pending, acked, _ := q.State(); acked != 2 || pending != 0 {
		t.Fatalf("acked=%d pending=%d, want 2 acked", acked, pending)
	}
}

func TestShutdownWhileTheStoreFailsLeavesTheBatchUnacked(t *testing.T) {
	q, s := queuetest.NewAcked(), &fakeStore{failures: 1 << 30}
	q.Push(body(1, 1), 1)
	ctx, cancel := context.WithCancel(context.Background())
	p := core.NewPipeline(q, s, fastConfig(), nil, nil)
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		calls := s.calls
		s.mu.Unlock()
		if calls >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel while the store was failing")
	}
	if _, pending, acked, dead := q.State(); pending != 1 || acked != 0 || dead != 0 {
		t.Fatalf("pending=%d acked=%d dead=%d, want the message left pending for redelivery", pending, acked, dead)
	}
}

func TestStockAnomalyIsDeadLetteredNotAcked(t *testing.T) {
	q, s := queuetest.NewAcked(), &fakeStore{rejectVoucher: 9}
	q.Push(body(1, 1), 1)
	q.Push(body(2, 9), 1)
	handle(core.NewPipeline(q, s, fastConfig(), nil, nil), q)
	_, _, acked, dead := q.State()
	if acked != 1 || dead != 1 {
		t.Fatalf("acked=%d dead=%d, want the good order acked and the anomaly dead-lettered", acked, dead)
	}
	for _, reason := range q.DeadReasons() {
		if reason == "" || reason[:len(core.DeadLetterStockAnomaly)] != string(core.DeadLetterStockAnomaly) {
			t.Fatalf("dead-letter reason %q does not name the stock anomaly", reason)
		}
	}
}

// TestEachAnomalyIsDeadLetteredUnderItsKind: a reused order id and a buyer
// holding another order are dead-lettered under their own reasons.
func TestEachAnomalyIsDeadLetteredUnderItsKind(t *testing.T) {
	for _, kind := range []core.DeadLetterReason{core.DeadLetterIDCollision, core.DeadLetterBuyerHoldsAnother} {
		q, s := queuetest.NewAcked(), &fakeStore{rejectVoucher: 9, rejectKind: kind}
		q.Push(body(2, 9), 1)
		handle(core.NewPipeline(q, s, fastConfig(), nil, nil), q)
		if len(q.DeadReasons()) != 1 {
			t.Fatalf("%s: %d dead letters, want 1", kind, len(q.DeadReasons()))
		}
		for _, reason := range q.DeadReasons() {
			if !strings.HasPrefix(reason, string(kind)+": ") {
				t.Fatalf("dead-letter reason %q, want it to name %s", reason, kind)
			}
		}
	}
}

func TestRedeliveredCopiesInOneBatchArePersistedOnceAndAllAcked(t *testing.T) {
	q, s := queuetest.NewAcked(), &fakeStore{}
	q.Push(body(1, 1), 1)
	q.Push(body(1, 1), 2) // the same order delivered twice (list/stream backends can)
	handle(core.NewPipeline(q, s, fastConfig(), nil, nil), q)
	if _, _, acked, _ := q.State(); acked != 2 || s.count() != 1 {
		t.Fatalf("acked=%d rows=%d, want both deliveries acked and one row", acked, s.count())
	}
}

func TestRunDrainsEverythingWithSeveralConsumers(t *testing.T) {
	q, s := queuetest.NewAcked(), &fakeStore{}
	for i := range 1000 {
		q.Push(body(int64(i+1), 1), 1)
	}
	cfg := fastConfig()
	cfg.Consumers = 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { core.NewPipeline(q, s, cfg, nil, nil).Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.count() < 1000 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	<-done
	if _, pending, acked, _ := q.State(); s.count() != 1000 || acked != 1000 || pending != 0 {
		t.Fatalf("rows=%d acked=%d pending=%d, want 1000, 1000, 0", s.count(), acked, pending)
	}
}

// timedQueue records when each fetch that returned something happened.
type timedQueue struct {
	*queuetest.Acked
	mu    sync.Mutex
	times []time.Time
	sizes []int
}

func (q *timedQueue) Consumer(context.Context, int) (core.Consumer, error) { return q, nil }
func (q *timedQueue) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	ds, err := q.Acked.Fetch(ctx, max)
	if len(ds) > 0 {
		q.mu.Lock()
		q.times, q.sizes = append(q.times, time.Now()), append(q.sizes, len(ds))
		q.mu.Unlock()
	}
	return ds, err
}

// TestLingerWaitsAfterASmallBatchOnly: after a batch smaller than the
// batch size, the consumer waits Linger before fetching again (so the next
// batch gathers what arrived meanwhile); after a full batch, it does not.
func TestLingerWaitsAfterASmallBatchOnly(t *testing.T) {
	const linger = 150 * time.Millisecond
	q, s := &timedQueue{Acked: queuetest.NewAcked()}, &fakeStore{}
	for i := range 25 {
		q.Push(body(int64(i+1), 1), 1)
	}
	cfg := fastConfig()
	cfg.Linger = linger // batch size 10: 10, 10, then 5 (small)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { core.NewPipeline(q, s, cfg, nil, nil).Run(ctx); close(done) }()
	for s.count() < 25 {
		time.Sleep(time.Millisecond)
	}
	q.Push(body(26, 1), 1) // arrives during the linger after the small batch
	q.Push(body(27, 1), 1)
	for s.count() < 27 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.sizes) != 4 || q.sizes[0] != 10 || q.sizes[1] != 10 || q.sizes[2] != 5 || q.sizes[3] != 2 {
		t.Fatalf("batches %v, want 10, 10, 5, then the two that arrived during the linger together", q.sizes)
	}
	if gap := q.times[1].Sub(q.times[0]); gap >= linger {
		t.Errorf("waited %v after a full batch", gap)
	}
	if gap := q.times[3].Sub(q.times[2]); gap < linger {
		t.Errorf("fetched again %v after a small batch, want at least the linger %v", gap, linger)
	}
}
