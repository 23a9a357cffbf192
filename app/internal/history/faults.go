package history

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// Faults strike while a sale is driven.
type Faults struct {
	// ReconcileEvery: an operator's reconcile of a random voucher on a
	// random instance this often (0: none).
	ReconcileEvery time.Duration
	// Kill, if set, is called once the run has done each fraction of its
	// operations in KillAt (Redis SIGKILLed and restarted, say).
	Kill   func()
	KillAt []float64
	// Letters, if set, makes the consumers dead-letter a voucher's orders
	// for a while (Letters.Slip), the letters then rebuilt over and
	// re-driven.
	Letters *LetterFault
	// Steer, if set, is an operator pausing, resuming and restocking
	// vouchers while they sell.
	Steer *SteerFault
}

// LetterFault is an operator's slip on one voucher (the one with the most
// stock left when it strikes): its stock column lowered far below zero
// from the run's From to its To (fractions of its operations, between the
// kills), so that every order of it persisted meanwhile is refused and
// dead-lettered (stock_anomaly) though its shopper was told 200; then the
// column put back, the voucher reconciled (a rebuild with the letters
// open: their units and their buyers' marks must stay theirs) and the
// letters re-driven until none is open (Redrive, which the test calls
// again before it settles the sale). No other reconcile touches the
// voucher while the column is wrong: a rebuild then would deal the wrong
// stock.
type LetterFault struct {
	From, To float64
	// Slip adds delta to the voucher's stock column (SQL: stock = stock +
	// delta, so that the consumers' own changes in between are kept).
	Slip func(ctx context.Context, voucher, delta int64) error
	// Leave tells a voucher the slip may not strike (nil: none): one an
	// operator steers meanwhile, whose stock changes the slipped column
	// would refuse.
	Leave func(voucher int64) bool

	voucher  atomic.Int64
	slipping atomic.Bool
	// reconciling is held (read) by each operator's reconcile of the run
	// from its check of the slip to its answer, and (write) by the slip
	// as it begins: a reconcile that checked before the slip began is
	// over before the column is lowered. Without it, one that checked an
	// instant before read the lowered column, and the voucher's stock
	// read too low until the slip's own reconcile (1 run in 8 of the
	// cluster's, with the operator's steering loading the instances).
	reconciling sync.RWMutex
}

// mayReconcile tells whether the run's operator may reconcile v now, and
// if so holds the slip off until release is called.
func (f *LetterFault) mayReconcile(v int64) (release func(), ok bool) {
	f.reconciling.RLock()
	if f.slipping.Load() && v == f.Voucher() {
		f.reconciling.RUnlock()
		return nil, false
	}
	return f.reconciling.RUnlock, true
}

// Voucher is the voucher the slip struck (0: none yet).
func (f *LetterFault) Voucher() int64 { return f.voucher.Load() }

// slipDelta is what the slip takes off the column: more than any voucher's
// stock, so that every order persisted meanwhile is refused.
const slipDelta = 1_000_000

// strike makes the slip, the rebuild, and the first re-drives.
func (f *LetterFault) strike(ctx context.Context, s Sale, rec *Recorder) {
	until := func(at float64) {
		for ctx.Err() == nil && float64(rec.Len()) < at*float64(s.Ops) {
			sleep(ctx, 2*time.Millisecond)
		}
	}
	until(f.From)
	// Every voucher answering, so none is left to be rebuilt (a rebuild
	// while the column is wrong would deal the wrong stock: a cluster's
	// restarted master answers CLUSTERDOWN for a second after a kill);
	// past To with one still silent, no slip.
	v, ok := f.choose(ctx, s)
	for !ok {
		if ctx.Err() != nil || float64(rec.Len()) >= f.To*float64(s.Ops) {
			return
		}
		sleep(ctx, 20*time.Millisecond)
		v, ok = f.choose(ctx, s)
	}
	f.reconciling.Lock()
	f.voucher.Store(v)
	f.slipping.Store(true)
	f.reconciling.Unlock()
	if err := f.Slip(ctx, v, -slipDelta); err != nil {
		f.slipping.Store(false)
		return
	}
	until(f.To)
	// Put back whatever happens to the run's context.
	f.Slip(context.WithoutCancel(ctx), v, slipDelta)
	f.slipping.Store(false)
	Admin(ctx, s.URLs[0], s.AdminToken, "POST", "/api/admin/vouchers/"+strconv.FormatInt(v, 10)+"/reconcile", nil)
	for ctx.Err() == nil {
		f.Redrive(ctx, s, 0)
		sleep(ctx, 300*time.Millisecond)
	}
}

// choose is the voucher with the most stock left, if every voucher
// answers on every instance: each has then verified it against the live
// store's present incarnation, so none rebuilds it while the column is
// wrong (an instance that had not, after a master's restart, rebuilt the
// slipped voucher's lost bucket from the slipped column: no stock until
// the slip's reconcile, a stock read too low in the history).
func (f *LetterFault) choose(ctx context.Context, s Sale) (int64, bool) {
	v, most := int64(0), int64(-1)
	for _, id := range s.Vouchers {
		if f.Leave != nil && f.Leave(id) {
			continue
		}
		for i, base := range s.URLs {
			var got struct{ Stock int64 }
			status, err := Admin(ctx, base, "", "GET", "/api/vouchers/"+strconv.FormatInt(id, 10), &got)
			if err != nil || status != 200 {
				return 0, false
			}
			if i == 0 && got.Stock > most {
				v, most = id, got.Stock
			}
		}
	}
	return v, true
}

// Redrive re-drives the open dead letters of the voucher the slip struck
// until none is open, or within has passed (0: once), and says how many
// are left open.
func (f *LetterFault) Redrive(ctx context.Context, s Sale, within time.Duration) int {
	if f.Voucher() == 0 {
		return 0 // no slip was made
	}
	v := strconv.FormatInt(f.Voucher(), 10)
	deadline := time.Now().Add(within)
	for {
		var page struct {
			Open int `json:"open"`
		}
		req, err := http.NewRequestWithContext(ctx, "POST", s.URLs[0]+"/api/admin/deadletters/redrive", strings.NewReader(`{"voucher":"`+v+`"}`))
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+s.AdminToken)
			req.Header.Set("Content-Type", "application/json")
			doJSON(req, nil)
		}
		Admin(ctx, s.URLs[0], s.AdminToken, "GET", "/api/admin/deadletters?voucher="+v, &page)
		if page.Open == 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
			return page.Open
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// Run drives the sale while the faults strike, and returns its history.
func Run(ctx context.Context, s Sale, f Faults) []porcupine.Operation {
	rec := NewRecorder()
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if f.Letters != nil {
		wg.Go(func() { f.Letters.strike(ctx, s, rec) })
	}
	if f.Steer != nil {
		wg.Go(func() { f.Steer.run(ctx, s, rec) })
	}
	if f.ReconcileEvery > 0 {
		wg.Go(func() {
			for ctx.Err() == nil {
				v := s.Vouchers[rand.IntN(len(s.Vouchers))]
				release := func() {}
				if f.Letters != nil {
					var ok bool
					if release, ok = f.Letters.mayReconcile(v); !ok {
						sleep(ctx, f.ReconcileEvery)
						continue
					}
				}
				base := s.URLs[rand.IntN(len(s.URLs))]
				Admin(ctx, base, s.AdminToken, "POST", "/api/admin/vouchers/"+strconv.FormatInt(v, 10)+"/reconcile", nil)
				release()
				sleep(ctx, f.ReconcileEvery)
			}
		})
	}
	if f.Kill != nil {
		wg.Go(func() {
			for _, at := range f.KillAt {
				for ctx.Err() == nil && float64(rec.Len()) < at*float64(s.Ops) {
					sleep(ctx, 5*time.Millisecond)
				}
				if ctx.Err() == nil {
					f.Kill()
				}
			}
		})
	}
	Drive(ctx, s, rec)
	stop()
	wg.Wait()
	return rec.Operations()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Len is how many operations were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// Outcomes counts the history's answers by outcome.
func Outcomes(ops []porcupine.Operation) map[string]int {
	out := map[string]int{}
	for _, op := range ops {
		out[op.Output.(Output).Outcome.String()]++
	}
	return out
}

// KindOutcomes counts the history's answers by operation and outcome
// ("pay accepted", "notify accepted paid").
func KindOutcomes(ops []porcupine.Operation) map[string]int {
	out := map[string]int{}
	for _, op := range ops {
		in, o := op.Input.(Input), op.Output.(Output)
		out[strings.TrimSpace(in.Kind.String()+" "+o.Outcome.String()+" "+o.OrderStatus+o.Result)]++
	}
	return out
}

// SQLLedger reads the contract's tables: a voucher's orders from
// tb_voucher_order, its stock column from tb_seckill_voucher.
func SQLLedger(db *sql.DB) Ledger {
	return func(ctx context.Context, v int64) (map[int64]int64, int64, error) {
		orders := map[int64]int64{}
		rows, err := db.QueryContext(ctx, "SELECT id, user_id FROM tb_voucher_order WHERE voucher_id = ?", v)
		if err != nil {
			return nil, 0, err
		}
		defer rows.Close()
		for rows.Next() {
			var id, user int64
			if err := rows.Scan(&id, &user); err != nil {
				return nil, 0, err
			}
			orders[id] = user
		}
		if err := rows.Err(); err != nil {
			return nil, 0, err
		}
		var left int64
		err = db.QueryRowContext(ctx, "SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?", v).Scan(&left)
		return orders, left, err
	}
}
