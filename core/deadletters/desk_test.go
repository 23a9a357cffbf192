package deadletters_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
)

// memRegister is a register in memory.
type memRegister struct {
	mu      sync.Mutex
	letters []deadletters.Letter
	rows    map[int64]core.Order // the database's orders
}

func (r *memRegister) Cursor(context.Context, string) (string, error) { return "", nil }
func (r *memRegister) Collect(context.Context, string, string, string, []deadletters.Letter) error {
	return errors.New("not collected here")
}
func (r *memRegister) Open(context.Context) (int64, error) { return 0, nil }

func (r *memRegister) List(_ context.Context, f deadletters.Filter, after int64, limit int) (deadletters.Page, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var page deadletters.Page
	for _, l := range r.letters {
		if (l.Resolved != "") != f.Resolved || (f.Reason != "" && l.Reason != f.Reason) || (len(f.IDs) > 0 && !slices.Contains(f.IDs, l.ID)) {
			continue
		}
		if l.Resolved == "" {
			page.Open++
		}
		if l.ID > after && len(page.Letters) < limit {
			page.Letters = append(page.Letters, l)
		} else if l.ID > after && page.Next == 0 {
			page.Next = page.Letters[len(page.Letters)-1].ID
		}
	}
	return page, nil
}

func (r *memRegister) Letter(_ context.Context, id int64) (deadletters.Letter, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.letters[id-1], nil
}

func (r *memRegister) Resolve(_ context.Context, ids []int64, how deadletters.Resolution, note string, at time.Time) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, id := range ids {
		if l := &r.letters[id-1]; l.Resolved == "" {
			l.Resolved, l.Note, l.ResolvedAt, n = how, note, at, n+1
			if how == deadletters.Redriven {
				l.Redriven++
			}
		}
	}
	return n, nil
}

func (r *memRegister) Failed(_ context.Context, id int64, detail string, _ time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.letters[id-1].Redriven++
	r.letters[id-1].Error = detail
	return nil
}

func (r *memRegister) PersistedOrders(_ context.Context, ids []int64) (map[int64]bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int64]bool{}
	for _, id := range ids {
		_, out[id] = r.rows[id]
	}
	return out, nil
}

// SaveOrders persists each order unless refuse names it.
func (r *memRegister) SaveOrders(_ context.Context, orders []core.Order) (core.SaveResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res core.SaveResult
	for _, o := range orders {
		if o.VoucherID == refusedVoucher {
			res.Rejected = append(res.Rejected, core.Rejection{Order: o, Reason: "no stock"})
			continue
		}
		if _, dup := r.rows[o.ID]; dup {
			panic("an order persisted twice")
		}
		o.Status = core.StatusCreated
		r.rows[o.ID] = o
		res.Created++
	}
	return res, nil
}

func (r *memRegister) FindOrder(_ context.Context, id int64) (core.Order, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.rows[id]
	if !ok {
		return core.Order{}, core.ErrOrderNotFound
	}
	return o, nil
}

// Withdraw is the lifecycle's: a cancelled row unless the id has one.
func (r *memRegister) Withdraw(_ context.Context, o core.Order) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.rows[o.ID]; ok {
		return false, nil
	}
	o.Status = core.StatusCancelled
	r.rows[o.ID] = o
	return true, nil
}

const refusedVoucher = 9

func (r *memRegister) add(reason core.DeadLetterReason, o core.Order, body []byte) int64 {
	if body == nil {
		body = core.EncodeOrder(o)
	}
	id := int64(len(r.letters) + 1)
	r.letters = append(r.letters, deadletters.Letter{ID: id, Reason: reason, Body: body, Order: o})
	return id
}

func newDesk(r *memRegister) *deadletters.Desk {
	return deadletters.NewDesk(deadletters.DeskConfig{Register: r, Store: r, Orders: r, Withdrawer: r,
		PayWindow: time.Minute, Limit: 2, Batch: 2})
}

// TestARedriveTakesWhatItCanAndSkipsTheRest: over several batches, a
// re-drive persists each order once (two letters of one order, one row),
// resolves one found in the database without persisting it again, skips
// poison and unauthenticated letters, records a refusal, and stops
// re-driving a letter past the limit.
func TestARedriveTakesWhatItCanAndSkipsTheRest(t *testing.T) {
	r := &memRegister{rows: map[int64]core.Order{}}
	at := time.Unix(1000, 0)
	o := func(id, voucher int64) core.Order {
		return core.Order{ID: id, UserID: id, VoucherID: voucher, CreatedAt: at}
	}
	a := r.add(core.DeadLetterStockAnomaly, o(1, 1), nil)
	a2 := r.add(core.DeadLetterTooManyTries, o(1, 1), nil) // delivered twice, dead-lettered twice
	r.rows[2] = o(2, 1)
	found := r.add(core.DeadLetterTooManyTries, o(2, 1), nil)
	r.add(core.DeadLetterPoison, core.Order{}, []byte("junk")) // skipped: left open
	r.add(core.DeadLetterUnauthenticated, o(3, 1), nil)        // skipped: left open
	refused := r.add(core.DeadLetterStockAnomaly, o(4, refusedVoucher), nil)
	desk := newDesk(r)
	ctx := context.Background()
	if n, err := desk.Count(ctx, deadletters.Filter{}); err != nil || n != 6 {
		t.Fatalf("count %d %v, want 6", n, err)
	}
	out, err := desk.Redrive(ctx, deadletters.Filter{}, time.Time{})
	if err != nil || out != (deadletters.Outcome{Redriven: 3, Skipped: 3, Refused: 1}) {
		t.Fatalf("re-drive: %+v %v; want 3 re-driven (two letters of order 1, order 2 found), 3 skipped of which 1 refused (order 4)", out, err)
	}
	want := map[int64]deadletters.Resolution{a: deadletters.Redriven, a2: deadletters.Redriven, found: deadletters.Persisted}
	for _, l := range r.letters {
		if l.Resolved != want[l.ID] {
			t.Errorf("letter %d (%s) resolved %q, want %q", l.ID, l.Reason, l.Resolved, want[l.ID])
		}
	}
	if p := r.rows[1].PayBy; !p.Equal(at.Add(time.Minute)) {
		t.Errorf("the re-driven order is due at %v, want its reservation plus the pay window", p)
	}
	if _, ok := r.rows[3]; ok {
		t.Error("an unauthenticated message's order was persisted")
	}
	for range 3 {
		desk.Redrive(ctx, deadletters.Filter{IDs: []int64{refused}}, time.Time{})
	}
	if l := r.letters[refused-1]; l.Redriven != 2 || l.Resolved != "" || l.Error == "" {
		t.Errorf("the refused letter: re-driven %d times, resolved %q, error %q; want the limit of 2, open, the refusal", l.Redriven, l.Resolved, l.Error)
	}
}

// TestADiscardWithdrawsOnlyOrdersOfOurs: a discard withdraws an order the
// database does not have, resolves one it has as persisted (nothing
// changed) and one cancelled before as discarded, and resolves poison, a
// forged order and an id another order holds without withdrawing
// anything.
func TestADiscardWithdrawsOnlyOrdersOfOurs(t *testing.T) {
	r := &memRegister{rows: map[int64]core.Order{}}
	o := func(id int64) core.Order {
		return core.Order{ID: id, UserID: id, VoucherID: 1, CreatedAt: time.Unix(1000, 0)}
	}
	gone := r.add(core.DeadLetterStockAnomaly, o(1), nil)
	r.rows[2] = core.Order{ID: 2, Status: core.StatusPaid}
	live := r.add(core.DeadLetterTooManyTries, o(2), nil)
	r.rows[3] = core.Order{ID: 3, Status: core.StatusCancelled}
	cancelled := r.add(core.DeadLetterTooManyTries, o(3), nil)
	r.add(core.DeadLetterPoison, core.Order{}, []byte("junk"))
	r.add(core.DeadLetterUnauthenticated, o(5), nil)
	r.rows[6] = core.Order{ID: 6, UserID: 99, Status: core.StatusCreated}
	r.add(core.DeadLetterIDCollision, o(6), nil)
	out, err := newDesk(r).Discard(context.Background(), deadletters.Filter{}, "by hand", time.Time{})
	if err != nil || out.Discarded != 6 {
		t.Fatalf("discard: %+v %v, want all 6 resolved", out, err)
	}
	if r.rows[1].Status != core.StatusCancelled || r.rows[6].UserID != 99 {
		t.Errorf("rows %v: want order 1 withdrawn, order 6 (another's) untouched", r.rows)
	}
	if _, ok := r.rows[5]; ok {
		t.Error("a forged order was withdrawn: its unit would be returned")
	}
	for id, want := range map[int64]deadletters.Resolution{gone: deadletters.Discarded, live: deadletters.Persisted, cancelled: deadletters.Discarded} {
		if l := r.letters[id-1]; l.Resolved != want || l.Note != "by hand" {
			t.Errorf("letter %d resolved %q (%q), want %q with the note", id, l.Resolved, l.Note, want)
		}
	}
}

// TestAnActionPastItsBudgetStopsAndTheNextGoesOn: a re-drive and a
// discard whose budget is spent stop after a batch (a letter) and say
// there is more; calls again take the rest, each letter once.
func TestAnActionPastItsBudgetStopsAndTheNextGoesOn(t *testing.T) {
	r := &memRegister{rows: map[int64]core.Order{}}
	for id := int64(1); id <= 5; id++ {
		r.add(core.DeadLetterTooManyTries, core.Order{ID: id, UserID: id, VoucherID: 1, CreatedAt: time.Unix(1000, 0)}, nil)
	}
	desk := newDesk(r) // batches of 2
	ctx := context.Background()
	spent := time.Unix(1, 0)
	var calls, redriven int
	for more := true; more; calls++ {
		out, err := desk.Redrive(ctx, deadletters.Filter{IDs: []int64{1, 2, 3}}, spent)
		if err != nil {
			t.Fatal(err)
		}
		redriven, more = redriven+out.Redriven, out.More
	}
	if calls != 2 || redriven != 3 {
		t.Fatalf("%d calls re-drove %d, want 2 calls (a batch of 2, then 1) for 3", calls, redriven)
	}
	calls = 0
	discarded := 0
	for more := true; more; calls++ {
		out, err := desk.Discard(ctx, deadletters.Filter{}, "", spent)
		if err != nil {
			t.Fatal(err)
		}
		discarded, more = discarded+out.Discarded, out.More
	}
	if calls != 2 || discarded != 2 {
		t.Fatalf("%d calls discarded %d, want 2 calls (a letter each) for the 2 open", calls, discarded)
	}
}
