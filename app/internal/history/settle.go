package history

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Ledger reads a voucher's persisted orders (order id -> user id) and its
// stock column from the database.
type Ledger func(ctx context.Context, voucher int64) (orders map[int64]int64, stockColumn int64, err error)

// Settle waits, up to within, for the sale to settle — every order an
// answer named persisted and every voucher's audit clean — then checks
// the state it left against the history:
//   - every order answered 200 (or named by already_purchased or a read) is
//     a row, and no shopper has two;
//   - the stock column is the stock less the rows;
//   - every row is an order some answer named, or the order of a shopper
//     whose request had no answer (it reserved, unheard);
//   - the audit (Redis against MySQL) finds no difference.
//
// It answers with the buyers the settled sale holds, which Resolve takes.
func Settle(ctx context.Context, s Sale, ops []porcupine.Operation, ledger Ledger, within time.Duration) (Buyers, error) {
	named := map[int64]map[int64]int64{}  // voucher -> order -> user
	unheard := map[int64]map[int64]bool{} // voucher -> users with an Unknown buy
	deltas := map[int64]*stockDeltas{}
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		if named[in.Voucher] == nil {
			named[in.Voucher], unheard[in.Voucher], deltas[in.Voucher] = map[int64]int64{}, map[int64]bool{}, &stockDeltas{}
		}
		switch {
		case in.Kind == ChangeStock:
			deltas[in.Voucher].add(in.Delta, out.Outcome)
		case out.Outcome == Reserved || out.Outcome == Held:
			named[in.Voucher][out.OrderID] = in.User
		case out.Outcome == Unknown && in.Kind == Buy:
			unheard[in.Voucher][in.User] = true
		}
	}
	deadline := time.Now().Add(within)
	var problems []string
	for {
		problems = problems[:0]
		buyers := Buyers{}
		for _, v := range s.Vouchers {
			rows, found := settled(ctx, s, v, voucherHistory{named[v], unheard[v], deltas[v]}, ledger)
			problems = append(problems, found...)
			buyers[v] = map[int64]bool{}
			for _, user := range rows {
				buyers[v][user] = true
			}
		}
		if len(problems) == 0 {
			return buyers, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	sort.Strings(problems)
	return nil, fmt.Errorf("the settled sale disagrees with its history (%v after the run):\n  %s", within, strings.Join(problems, "\n  "))
}

// Buyers is, per voucher, the shoppers a settled sale holds an order of.
type Buyers map[int64]map[int64]bool

// Resolve drops from a history the unanswered buys of shoppers the
// settled sale holds no order of: they reserved nothing, or the sale lost
// what they reserved — and then the stock reads around it, which saw the
// unit taken, make the history without them no linearizable one: the
// loss is caught still. The check is never weaker for it, and far
// quicker: an unanswered buy stays pending to the history's end, each
// may or may not have reserved, and the checker carries every set of
// buyers they could have made (a dozen distinct shoppers unanswered in
// an outage before the sale sold out is thousands of states at each
// step). In CI a cluster run of 2000 operations with 450 unanswered was
// not decided within 3 minutes.
func Resolve(ops []porcupine.Operation, buyers Buyers) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		in := o.Input.(Input)
		if in.Kind == Buy && o.Output.(Output).Outcome == Unknown && !buyers[in.Voucher][in.User] {
			continue
		}
		out = append(out, o)
	}
	return out
}

// settled is what the voucher's settled state disagrees with, and its
// rows (order -> user).
func settled(ctx context.Context, s Sale, v int64, h voucherHistory, ledger Ledger) (map[int64]int64, []string) {
	var out []string
	named, unheard := h.named, h.unheard
	rows, stockColumn, err := ledger(ctx, v)
	if err != nil {
		return nil, []string{fmt.Sprintf("voucher %d: ledger: %v", v, err)}
	}
	for order, user := range named {
		if u, ok := rows[order]; !ok || u != user {
			out = append(out, fmt.Sprintf("voucher %d: order %d of user %d was answered, and is not in the database (%s)", v, order, user, whereabouts(ctx, s, order, user)))
		}
	}
	perUser := map[int64]int{}
	for order, user := range rows {
		perUser[user]++
		if _, ok := named[order]; !ok && !unheard[user] {
			out = append(out, fmt.Sprintf("voucher %d: row %d of user %d was never answered to anyone, and the user had no unanswered request", v, order, user))
		}
	}
	for user, n := range perUser {
		if n > 1 {
			out = append(out, fmt.Sprintf("voucher %d: user %d has %d orders", v, user, n))
		}
	}
	if want := s.Stock - int64(len(rows)); !h.deltas.explain(stockColumn - want) {
		out = append(out, fmt.Sprintf("voucher %d: stock column %d, want %d (stock %d less %d rows) moved by the stock changes answered (%d) and some of those unanswered (%v)",
			v, stockColumn, want, s.Stock, len(rows), h.deltas.answered, h.deltas.unanswered))
	}
	// A shopper's look at the voucher first: its live state may be gone
	// with a rebuild that failed late in the run (a master killed under
	// it), to be rebuilt on its next use, and the run may have made none.
	// After the use the audit must find it exact.
	Admin(ctx, s.URLs[0], "", "GET", "/api/vouchers/"+strconv.FormatInt(v, 10), nil)
	return rows, append(out, auditProblems(ctx, s, v)...)
}

// auditProblems is what the voucher's audit (Redis against MySQL) finds,
// or says of itself when it cannot answer.
func auditProblems(ctx context.Context, s Sale, v int64) []string {
	var audit struct {
		Differences []string `json:"differences"`
	}
	status, err := Admin(ctx, s.URLs[0], s.AdminToken, "GET", "/api/admin/vouchers/"+strconv.FormatInt(v, 10)+"/audit", &audit)
	switch {
	case err != nil || status != 200:
		return []string{fmt.Sprintf("voucher %d: audit answered %d %v", v, status, err)}
	case len(audit.Differences) > 0:
		return []string{fmt.Sprintf("voucher %d: audit: %s", v, strings.Join(audit.Differences, "; "))}
	}
	return nil
}

// voucherHistory is what a voucher's history says its settled state must
// hold: the orders answers named, the users with an unanswered buy, the
// operators' stock changes.
type voucherHistory struct {
	named   map[int64]int64
	unheard map[int64]bool
	deltas  *stockDeltas
}

// stockDeltas are a voucher's stock changes: the sum of those answered
// 200, and each unanswered one (it may have been carried out, then or by
// a later instance's duty).
type stockDeltas struct {
	answered   int64
	unanswered []int64
}

func (d *stockDeltas) add(delta int64, outcome Outcome) {
	switch outcome {
	case Accepted:
		d.answered += delta
	case Unknown:
		d.unanswered = append(d.unanswered, delta)
	}
}

// explain tells whether the column's distance from the stock less the rows
// is the answered changes and some of the unanswered ones.
func (d *stockDeltas) explain(moved int64) bool {
	if d == nil {
		return moved == 0
	}
	sums := map[int64]bool{d.answered: true}
	for _, u := range d.unanswered {
		next := make(map[int64]bool, 2*len(sums))
		for sum := range sums {
			next[sum], next[sum+u] = true, true
		}
		sums = next
	}
	return sums[moved]
}

// whereabouts is what the server says of an order the database lacks, for
// the report: its owner's read of it (queued: the server still holds it
// somewhere) and any dead letter of it.
func whereabouts(ctx context.Context, s Sale, order, user int64) string {
	id := strconv.FormatInt(order, 10)
	req, err := http.NewRequestWithContext(ctx, "GET", s.URLs[0]+"/api/orders/"+id, nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", s.Token(user))
	var read struct {
		Status string `json:"status"`
	}
	status, err := doJSON(req, &read)
	var letter []string
	for _, state := range []string{"open", "resolved"} {
		var letters struct {
			Items []map[string]any `json:"items"`
		}
		Admin(ctx, s.URLs[0], s.AdminToken, "GET", "/api/admin/deadletters?limit=500&state="+state, &letters)
		for _, l := range letters.Items {
			if fmt.Sprint(l["orderId"]) == id {
				letter = append(letter, fmt.Sprintf("%s %v", state, l["reason"]))
			}
		}
	}
	return fmt.Sprintf("its owner reads %d %q %v; dead letters of it: %v", status, read.Status, err, letter)
}
