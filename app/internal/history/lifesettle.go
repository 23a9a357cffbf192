package history

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// SettleLifecycle waits, up to within, for a lifecycle run to settle —
// every order due expired, every unit back — then checks the state it
// left:
//   - every order an answer named is a row, of the shopper it was named to;
//   - no shopper holds two live (created or paid) orders of a voucher;
//   - no order is still unpaid past its deadline (GET /api/orders/{id});
//   - the stock column is the stock less the live rows, and the stock
//     shoppers read (Redis's) is the same: every unit given back came
//     back once;
//   - the audit finds no difference;
//   - the reconciliation finds no mismatch: no money kept on a cancelled
//     order, none owed back, no order paid without money.
func SettleLifecycle(ctx context.Context, s LifecycleSale, ops []porcupine.Operation, db *sql.DB, within time.Duration) error {
	named := map[int64]map[int64]int64{} // voucher -> order -> user
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		if named[in.Voucher] == nil {
			named[in.Voucher] = map[int64]int64{}
		}
		if out.OrderID != 0 && (out.Outcome == Reserved || out.Outcome == Held) {
			named[in.Voucher][out.OrderID] = in.User
		}
	}
	deadline := time.Now().Add(within)
	var problems []string
	for {
		problems = problems[:0]
		for _, v := range s.Vouchers {
			problems = append(problems, lifecycleSettled(ctx, s, v, named[v], db)...)
		}
		if len(problems) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("the settled lifecycle disagrees with its history (%v after the run):\n  %s", within, strings.Join(problems, "\n  "))
	}
	return nil
}

func lifecycleSettled(ctx context.Context, s LifecycleSale, v int64, named map[int64]int64, db *sql.DB) []string {
	var out []string
	rows, err := db.QueryContext(ctx, "SELECT id, user_id, status, COALESCE(cancel_reason, '') FROM tb_voucher_order WHERE voucher_id = ?", v)
	if err != nil {
		return []string{fmt.Sprintf("voucher %d: %v", v, err)}
	}
	owner, live := map[int64]int64{}, map[int64]int{}
	var liveRows int64
	for rows.Next() {
		var id, user int64
		var status int
		var reason string
		if err := rows.Scan(&id, &user, &status, &reason); err != nil {
			rows.Close()
			return []string{fmt.Sprintf("voucher %d: %v", v, err)}
		}
		owner[id] = user
		// Created, paid, or refunded by an operator who kept the unit sold.
		if status == 1 || status == 2 || (status == 5 || status == 6) && reason == "operator_kept" {
			live[user]++
			liveRows++
		}
	}
	rows.Close()
	for order, user := range named {
		if u, ok := owner[order]; !ok || u != user {
			out = append(out, fmt.Sprintf("voucher %d: order %d of user %d was answered, and is not in the database", v, order, user))
			continue
		}
		out = append(out, overdue(ctx, s, order, user)...)
	}
	for user, n := range live {
		if n > 1 {
			out = append(out, fmt.Sprintf("voucher %d: user %d holds %d live orders", v, user, n))
		}
	}
	var column int64
	if err := db.QueryRowContext(ctx, "SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?", v).Scan(&column); err != nil {
		return append(out, fmt.Sprintf("voucher %d: stock column: %v", v, err))
	}
	if want := s.Stock - liveRows; column != want {
		out = append(out, fmt.Sprintf("voucher %d: stock column %d, want %d (stock %d less %d live rows)", v, column, want, s.Stock, liveRows))
	}
	var read struct {
		Stock int64 `json:"stock"`
	}
	if status, err := Admin(ctx, s.URLs[0], "", "GET", "/api/vouchers/"+strconv.FormatInt(v, 10), &read); err != nil || status != 200 || read.Stock != column {
		out = append(out, fmt.Sprintf("voucher %d: shoppers read stock %d (%d %v), the column says %d", v, read.Stock, status, err, column))
	}
	out = append(out, auditProblems(ctx, s.Sale, v)...)
	return append(out, mismatches(ctx, s.Sale, v)...)
}

// mismatches are the reconciliation's of the voucher's payments.
func mismatches(ctx context.Context, s Sale, v int64) []string {
	var report struct {
		Mismatches []map[string]any `json:"mismatches"`
	}
	status, err := Admin(ctx, s.URLs[0], s.AdminToken, "GET", "/api/admin/payments/reconciliation?voucher="+strconv.FormatInt(v, 10), &report)
	if err != nil || status != 200 {
		return []string{fmt.Sprintf("voucher %d: the reconciliation answered %d %v", v, status, err)}
	}
	var out []string
	for _, m := range report.Mismatches {
		out = append(out, fmt.Sprintf("voucher %d: the reconciliation finds %v", v, m))
	}
	return out
}

// overdue says so if the order is unpaid past its deadline, as its owner
// reads it.
func overdue(ctx context.Context, s LifecycleSale, order, user int64) []string {
	req, err := http.NewRequestWithContext(ctx, "GET", s.URLs[0]+"/api/orders/"+strconv.FormatInt(order, 10), nil)
	if err != nil {
		return []string{err.Error()}
	}
	req.Header.Set("Authorization", s.Token(user))
	var o struct {
		Status string    `json:"status"`
		PayBy  time.Time `json:"payBy"`
	}
	if status, err := doJSON(req, &o); err != nil || status != 200 {
		return []string{fmt.Sprintf("order %d: its owner's read answered %d %v", order, status, err)}
	}
	if o.Status == "created" && time.Since(o.PayBy) > 0 {
		return []string{fmt.Sprintf("order %d: still unpaid %v past its deadline", order, time.Since(o.PayBy).Round(time.Millisecond))}
	}
	return nil
}
