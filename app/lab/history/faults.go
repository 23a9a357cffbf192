package history

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
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
}

// Run drives the sale while the faults strike, and returns its history.
func Run(ctx context.Context, s Sale, f Faults) []porcupine.Operation {
	rec := NewRecorder()
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if f.ReconcileEvery > 0 {
		wg.Go(func() {
			for ctx.Err() == nil {
				v := s.Vouchers[rand.IntN(len(s.Vouchers))]
				base := s.URLs[rand.IntN(len(s.URLs))]
				Admin(ctx, base, s.AdminToken, "POST", "/api/admin/vouchers/"+strconv.FormatInt(v, 10)+"/reconcile", nil)
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
