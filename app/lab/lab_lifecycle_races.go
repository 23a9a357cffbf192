package lab

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

// The lifecycle lab's runs: the resale, then each race (lab_lifecycle.go
// has the runner and what they share).

// resale: units on sale; the first buyers buy them all and a share never
// pay; new shoppers, who pay at once, arrive every 5 ms on either of two
// instances until every unit is paid (or the pay window plus 20 s).
func (l lifecycleLab) resale(t *labT, units, neverPayPct int) resaleResult {
	a, b := l.start(t, "", "lab-a"), l.start(t, "", "lab-b")
	bases := []string{a.base, b.base}
	voucher := l.voucher(t, a.base, units)
	// Each instance meets the voucher once before the sale (its first use
	// verifies the voucher's live state): the first buyers' reservations
	// then fall when they are sent, not bunched behind that.
	for _, base := range bases {
		l.call(base, "GET", "/api/vouchers/"+idString(voucher)+"/order", 1_000_000, nil)
	}
	r := resaleResult{Ran: true, Units: units}
	began := time.Now()
	// Those who never pay are spread through the buyers, so their
	// deadlines are too.
	neverPays := func(i int) bool { return i*neverPayPct%100 < neverPayPct }
	l.firstBuyers(t, bases, voucher, units, neverPays)
	for i := range units {
		if neverPays(i) {
			r.NeverPaid++
		}
	}
	var sales []time.Time
	sales, r.Shoppers = l.buyUntilPaid(bases, voucher, units)
	r.Took = time.Since(began)
	r.Unsold = units - l.count(voucher, "status IN (1, 2, 3)")
	l.measureResale(&r, voucher, sales)
	return r
}

// firstBuyers buy every unit, over a second, as in a sale, not in one
// instant: their deadlines fall at every phase of the once-a-second sweep,
// and the waits measured spread over it. Each pays at once unless
// neverPays says otherwise.
func (l lifecycleLab) firstBuyers(t *labT, bases []string, voucher int64, units int, neverPays func(int) bool) {
	var failed []int
	var mu sync.Mutex
	var buyers sync.WaitGroup
	for i := range units {
		buyers.Go(func() {
			order := l.buy(bases[i%2], voucher, 1+int64(i))
			if order != "" && (neverPays(i) || l.pay(bases[i%2], 1+int64(i), order)) {
				return
			}
			mu.Lock()
			failed = append(failed, i)
			mu.Unlock()
		})
		time.Sleep(time.Second / time.Duration(units))
	}
	buyers.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of the first buyers could not buy, or pay within the window (one: shopper %d)", len(failed), 1+failed[0])
	}
}

// buyUntilPaid sends new shoppers, who pay at once, every shopperEvery on
// either instance until every unit is paid (or the pay window plus 20 s);
// it returns when each bought, and how many shoppers came.
func (l lifecycleLab) buyUntilPaid(bases []string, voucher int64, units int) (sales []time.Time, shoppers int) {
	paid := func() int { return l.count(voucher, "status IN (2, 3)") }
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(l.window + 20*time.Second)
	for u := int64(100_000); time.Now().Before(end) && paid() < units; u++ {
		shoppers++
		base := bases[u%2]
		wg.Go(func() {
			order := l.buy(base, voucher, u)
			if order == "" {
				return
			}
			mu.Lock()
			sales = append(sales, time.Now())
			mu.Unlock()
			l.pay(base, u, order)
		})
		// Faster than units come back: the wait measured is the
		// expiry's, not the next shopper's.
		time.Sleep(shopperEvery)
	}
	wg.Wait()
	return sales, shoppers
}

// measureResale fills in how late the expired orders expired, and how
// soon each expired unit was sold again (the first sale after its
// deadline not already counted for another).
func (l lifecycleLab) measureResale(r *resaleResult, voucher int64, sales []time.Time) {
	expired := l.payBys(voucher, "status = 4 AND cancel_reason = 'expired'")
	r.Expired = len(expired)
	var lags []struct {
		PayBy      time.Time `bun:"pay_by"`
		UpdateTime time.Time `bun:"update_time"`
	}
	l.db.DB().NewSelect().Table("tb_voucher_order").Column("pay_by", "update_time").
		Where("voucher_id = ? AND status = 4 AND cancel_reason = 'expired'", voucher).Scan(context.Background(), &lags)
	var expiredAfter []time.Duration
	for _, x := range lags {
		expiredAfter = append(expiredAfter, x.UpdateTime.Sub(x.PayBy))
	}
	if len(expiredAfter) > 0 {
		slices.Sort(expiredAfter)
		r.ExpiredP50, r.ExpiredP99 = percentileOf(expiredAfter, .5), percentileOf(expiredAfter, .99)
	}
	slices.SortFunc(sales, func(a, b time.Time) int { return a.Compare(b) })
	var waits []time.Duration
	next := 0
	for _, due := range expired {
		for next < len(sales) && sales[next].Before(due) {
			next++
		}
		if next == len(sales) {
			break // not sold again
		}
		waits = append(waits, sales[next].Sub(due))
		next++
	}
	r.Resold = len(waits)
	if len(waits) > 0 {
		slices.Sort(waits)
		r.P50, r.P99, r.Max = percentileOf(waits, .5), percentileOf(waits, .99), waits[len(waits)-1]
	}
}

// paying is where three races start: two instances, a voucher of n units
// bought by shoppers 1..n (orders[i] is shopper i+1's), and each order's
// payment started ("" where it expired first).
func (l lifecycleLab) paying(t *labT, n int) (a, b *labProcess, bases []string, voucher int64, orders, payments []string) {
	a, b = l.start(t, "", "lab-a"), l.start(t, "", "lab-b")
	bases = []string{a.base, b.base}
	voucher = l.voucher(t, a.base, n)
	orders = l.buyAll(t, bases, voucher, 1, n)
	payments = make([]string, n)
	l.each(n, func(i int) { payments[i] = l.startPayment(bases[i%2], 1+int64(i), orders[i], l.window) })
	return a, b, bases, voucher, orders, payments
}

// payAtDeadline: every order's payment is started, then completed from
// 300 ms before its deadline to 1.5 s after, on either instance, against
// the expiry on both.
func (l lifecycleLab) payAtDeadline(t *labT, n int) raceResult {
	a, b, bases, voucher, orders, payments := l.paying(t, n)
	due := map[string]time.Time{}
	var rows []struct {
		ID    int64     `bun:"id"`
		PayBy time.Time `bun:"pay_by"`
	}
	l.db.DB().NewSelect().Table("tb_voucher_order").Column("id", "pay_by").Where("voucher_id = ?", voucher).Scan(context.Background(), &rows)
	for _, row := range rows {
		due[idString(row.ID)] = row.PayBy
	}
	var wg sync.WaitGroup
	for i := range n {
		if payments[i] == "" {
			continue // expired before its payment could start
		}
		wg.Go(func() {
			// From 300 ms before the deadline to 1.5 s after: a sweep
			// (every second) comes somewhere in between.
			jitter := time.Duration(i)*1800*time.Millisecond/time.Duration(n) - 300*time.Millisecond
			time.Sleep(time.Until(due[orders[i]].Add(jitter)))
			l.complete(bases[(i+1)%2], payments[i])
		})
	}
	wg.Wait()
	r := raceResult{Ran: true, Orders: n}
	l.verify(&r, a.base, voucher, n, []*labProcess{a, b})
	return r
}

// cancelWhilePaying: for each order, the shopper's cancel on one instance
// and the payment's completion on the other, sent together.
func (l lifecycleLab) cancelWhilePaying(t *labT, n int) raceResult {
	a, b, bases, voucher, orders, payments := l.paying(t, n)
	l.each(n, func(i int) {
		together := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-together; l.call(bases[i%2], "POST", "/api/orders/"+orders[i]+"/cancel", 1+int64(i), nil) })
		if payments[i] != "" {
			wg.Go(func() { <-together; l.complete(bases[(i+1)%2], payments[i]) })
		}
		close(together)
		wg.Wait()
	})
	r := raceResult{Ran: true, Orders: n}
	l.verify(&r, a.base, voucher, n, []*labProcess{a, b})
	return r
}

// lateNotification: every payment is started in time and its
// notification arrives after the order expired. None may make an order
// paid: each is refunded, and the units stay on sale.
func (l lifecycleLab) lateNotification(t *labT, n int) raceResult {
	a, b, bases, voucher, _, payments := l.paying(t, n)
	r := raceResult{Ran: true, Orders: n}
	if _, ok := l.waitSettled(a.base, voucher, n, l.lastDue(voucher), 20*time.Second); !ok {
		r.Broken = "the orders did not all expire within 20 s of their deadline"
		return r
	}
	l.each(n, func(i int) {
		if payments[i] != "" {
			l.complete(bases[(i+1)%2], payments[i])
		}
	})
	l.verify(&r, a.base, voucher, n, []*labProcess{a, b})
	if r.Held && (r.Paid != 0 || r.Refunded != countNonEmpty(payments)) {
		r.Held, r.Broken = false, fmt.Sprintf("%d paid and %d refunded after the expiry, want 0 and %d", r.Paid, r.Refunded, countNonEmpty(payments))
	}
	return r
}

// percentileOf reads the p-th percentile of sorted, nearest rank.
func percentileOf(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func countNonEmpty(xs []string) int {
	n := 0
	for _, x := range xs {
		if x != "" {
			n++
		}
	}
	return n
}

// killMidExpiry: one instance holds n unpaid orders, all due together; it
// is SIGKILLed as soon as the first of them is cancelled (mid-batch), and
// another instance is started. Every unit must come back, once.
func (l lifecycleLab) killMidExpiry(t *labT, n int) raceResult {
	a := l.start(t, "", "lab-a")
	voucher := l.voucher(t, a.base, n)
	l.buyAll(t, []string{a.base}, voucher, 1, n)
	l.waitRows(t, voucher, n)
	r := raceResult{Ran: true, Orders: n}
	payBys := l.payBys(voucher, "1 = 1")
	for time.Now().Before(payBys[len(payBys)-1].Add(10*time.Second)) && l.count(voucher, "status = 4") == 0 {
		time.Sleep(2 * time.Millisecond)
	}
	a.kill()
	r.StruckAt = l.count(voucher, "status = 4")
	if r.StruckAt == 0 {
		t.Fatal("no order expired within 10 s of its deadline")
	}
	b := l.start(t, "", "lab-b")
	// The killed instance's counts died with it: the stores are the check.
	l.unitsBack(&r, b.base, voucher, payBys[len(payBys)-1])
	return r
}

// unitsBack waits for every unit of the voucher's r.Orders orders, the
// last due at due, to be back in both stores (BackIn), verifies the race
// on the stores alone (units a rebuild restored, or an instance that died
// gave back, were not all counted one by one), and has a buyer whose order
// expired buy again.
func (l lifecycleLab) unitsBack(r *raceResult, base string, voucher int64, due time.Time) {
	if backIn, ok := l.waitSettled(base, voucher, r.Orders, due, 30*time.Second); ok {
		r.BackIn = backIn
	}
	l.verify(r, base, voucher, r.Orders, nil)
	if r.Held && l.buy(base, voucher, 1) == "" {
		r.Held, r.Broken = false, "a buyer whose order expired could not buy again"
	}
}

// redisLost: n unpaid orders, persisted; Redis restarts empty before their
// deadline. Each must still expire and its unit come back, in the rebuilt
// Redis as in the database.
func (l lifecycleLab) redisLost(t *labT, n int) raceResult {
	rp := redistopology.StartRedisProcess(t)
	a := l.start(t, rp.URL(), "lab-a")
	voucher := l.voucher(t, a.base, n)
	l.buyAll(t, []string{a.base}, voucher, 1, n)
	l.waitRows(t, voucher, n)
	payBys := l.payBys(voucher, "1 = 1")
	if time.Now().After(payBys[0]) {
		t.Fatal("the orders were due before Redis could be restarted: raise -pay-window")
	}
	rp.RestartEmpty()
	r := raceResult{Ran: true, Orders: n}
	l.unitsBack(&r, a.base, voucher, payBys[len(payBys)-1])
	return r
}

// queuedAtDeadline: the instance runs no consumer, so the orders are still
// queued (accepted, not in the database) when they fall due; an instance
// with consumers starts 3 s after the last deadline. The deadline the
// reservation recorded expires a queued order as it is; the database's
// sweep sees an order only once a consumer persisted it, and never one the
// queue lost.
func (l lifecycleLab) queuedAtDeadline(t *labT, n int) raceResult {
	switch l.cfg.Queue {
	case "sync":
		return raceResult{Note: "n/a: no queue (an order is in the database when accepted)"}
	case "memory":
		return raceResult{Note: "n/a: refused at start (SECKILL_CONSUMERS=0: the queue is the process's memory, which no other process drains)"}
	}
	a := l.start(t, "", "lab-a", "SECKILL_CONSUMERS", "0")
	voucher := l.voucher(t, a.base, n)
	l.buyAll(t, []string{a.base}, voucher, 1, n)
	// The orders are not in the database to read their deadlines from:
	// each is its reservation time plus the window, all before this.
	due := time.Now().Add(l.window)
	started := make(chan *labProcess, 1)
	go func() {
		time.Sleep(time.Until(due.Add(3 * time.Second)))
		b, err := l.startProcess("", "lab-b")
		if err != nil {
			started <- nil
			return
		}
		started <- b
	}()
	r := raceResult{Ran: true, Orders: n}
	if backIn, ok := l.waitSettled(a.base, voucher, n, due, 30*time.Second); ok {
		r.BackIn = backIn
	}
	b := <-started
	if b == nil {
		t.Fatal("the instance with consumers did not start")
	}
	t.Cleanup(b.stop)
	l.verify(&r, a.base, voucher, n, []*labProcess{a, b})
	return r
}
