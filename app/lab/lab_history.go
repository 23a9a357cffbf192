package lab

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
	"github.com/seckill-lab/seckill/app/internal/history"
)

// The history check per backend (app/internal/history, the suite's
// TestSaleHistoriesAreLinearizable): two server processes on a durable
// Redis of the lab's own, reconciles all along, Redis SIGKILLed and
// restarted twice; each voucher's history checked for linearizability,
// then the settled state against MySQL.

// historyResult is what the history check found on one backend.
type historyResult struct {
	Ran  bool
	Note string
	Ops  int
	// Outcomes counts the answers by kind (history.Outcome).
	Outcomes map[string]int
	// Linearizable and Settled, or what failed first.
	Linearizable, Settled bool
	Failure               string
}

const (
	historyVouchers = 8
	historyStock    = 8
	historyUsers    = 24
	historyOps      = 2000
)

func (f faultLab) historyCheck(t *labT) historyResult {
	rp := redistopology.StartDurableRedisProcess(t)
	cfg := f.cfg
	cfg.RedisURL = rp.URL()
	var urls []string
	for range 2 {
		p, err := startProcess(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
		urls = append(urls, p.base)
	}
	sale := history.Sale{URLs: urls, AdminToken: cfg.AdminToken, Stock: historyStock, Users: historyUsers,
		Clients: 12, Ops: historyOps, Timeout: 3 * time.Second}
	for range historyVouchers {
		v, err := createVoucher(urls[0], cfg.AdminToken, historyStock)
		if err != nil {
			t.Fatal(err)
		}
		sale.Vouchers = append(sale.Vouchers, v)
		*f.vouchers = append(*f.vouchers, v)
	}
	tokens := map[int64]string{}
	for u := int64(1); u <= historyUsers; u++ {
		tok, err := f.tokens.Issue(u, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = "Bearer " + tok
	}
	sale.Token = func(u int64) string { return tokens[u] }

	ops := history.Run(context.Background(), sale, history.Faults{
		ReconcileEvery: 50 * time.Millisecond, Kill: rp.Restart, KillAt: []float64{0.05, 0.33},
	})
	r := historyResult{Ran: true, Ops: len(ops), Outcomes: history.Outcomes(ops)}
	// Settled first: the unanswered buys of shoppers it holds no order of
	// are left out of the check (history.Resolve); an unsettled sale's
	// history is checked whole.
	buyers, settleErr := history.Settle(context.Background(), sale, ops, history.SQLLedger(f.db.DB().DB), 30*time.Second)
	checked := ops
	if settleErr == nil {
		checked = history.Resolve(ops, buyers)
	}
	if err := history.Check(checked, historyStock, time.Minute); err != nil {
		r.Failure = firstLine(err.Error())
		return r
	}
	r.Linearizable = true
	if settleErr != nil {
		r.Failure = firstLines(settleErr.Error(), 3)
		return r
	}
	r.Settled = true
	return r
}

// runHistory runs the history check on cfg's backend, turning a failure
// to set it up into the result's note.
func (f faultLab) runHistory() historyResult {
	f.progress("[%s] history check: two instances, reconciles, Redis killed twice…", f.cfg.Queue)
	var r historyResult
	if note := withLabT(func(t *labT) { r = f.historyCheck(t) }); note != "" {
		r = historyResult{Note: note}
	}
	switch {
	case !r.Ran:
		f.progress("[%s]   %s", f.cfg.Queue, r.Note)
	case r.Settled:
		f.progress("[%s]   linearizable, settled: %d operations %v", f.cfg.Queue, r.Ops, r.Outcomes)
	default:
		f.progress("[%s]   %s", f.cfg.Queue, r.Failure)
	}
	return r
}

func firstLine(s string) string { return firstLines(s, 1) }

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("… %d more", len(lines)-n))
	}
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " ")
}
