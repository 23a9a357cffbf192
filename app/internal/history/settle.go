package history

import (
	"context"
	"fmt"
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
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		if named[in.Voucher] == nil {
			named[in.Voucher], unheard[in.Voucher] = map[int64]int64{}, map[int64]bool{}
		}
		switch {
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
			rows, found := settled(ctx, s, v, named[v], unheard[v], ledger)
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
func settled(ctx context.Context, s Sale, v int64, named map[int64]int64, unheard map[int64]bool, ledger Ledger) (map[int64]int64, []string) {
	var out []string
	rows, stockColumn, err := ledger(ctx, v)
	if err != nil {
		return nil, []string{fmt.Sprintf("voucher %d: ledger: %v", v, err)}
	}
	for order, user := range named {
		if u, ok := rows[order]; !ok || u != user {
			out = append(out, fmt.Sprintf("voucher %d: order %d of user %d was answered, and is not in the database", v, order, user))
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
	if want := s.Stock - int64(len(rows)); stockColumn != want {
		out = append(out, fmt.Sprintf("voucher %d: stock column %d, want %d (stock %d less %d rows)", v, stockColumn, want, s.Stock, len(rows)))
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
