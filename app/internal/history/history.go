// Package history checks a sale the way an outside Jepsen-style checker
// does: concurrent shoppers (repeats included) buy from many small
// vouchers and read their stock and their orders through the HTTP API,
// while faults strike (Redis killed, reconciles, two instances); every
// call and its answer is recorded with its start and end, and each
// voucher's history is checked for linearizability against a sequential
// model of a sale (Porcupine). Settle then holds the state the sale left
// against the database: every order answered 200 persisted, none twice,
// the stock column equal to the stock less the rows, the audit clean.
//
// The driver, the model and the settled check live here, out of the
// server package, so the tests (app/server) and the comparison lab
// (`seckill-lab compare`) run the same checker.
package history

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation does.
type Kind int

const (
	// Buy is POST /api/vouchers/{id}/seckill.
	Buy Kind = iota
	// ReadStock is GET /api/vouchers/{id}.
	ReadStock
	// ReadOrder is GET /api/vouchers/{id}/order.
	ReadOrder
)

func (k Kind) String() string {
	return [...]string{"buy", "stock", "order", "pay", "notify", "cancel", "pause", "resume", "stock±", "end", "complete", "refund"}[k]
}

// Input is an operation's call.
type Input struct {
	Kind    Kind
	Voucher int64
	User    int64
	// Order is the order paid, notified or cancelled; Txn and Succeeded
	// the notice's (lifecycle.go).
	Order     int64
	Txn       string
	Succeeded bool
	// ReturnUnit: an operator's refund puts the unit back on sale.
	ReturnUnit bool
	// Delta is a stock change's units (steer.go).
	Delta int64
	// At is the call's time, for the lifecycle model (CheckLifecycle
	// stamps it).
	At int64
}

// Outcome classifies an answer by what it says about the sale.
type Outcome int

const (
	// Unknown: the call may or may not have taken effect (a 5xx, a
	// timeout, a connection lost, an unconfirmed reservation).
	Unknown Outcome = iota
	// Reserved: 200 with OrderID (Buy).
	Reserved
	// Held: 409 already_purchased with OrderID (Buy); 200 with OrderID
	// (ReadOrder).
	Held
	// SoldOut: 409 sold_out (Buy).
	SoldOut
	// NoOrder: 404 order_not_found (ReadOrder).
	NoOrder
	// Stock: 200 with Stock (ReadStock).
	Stock
	// Refused: an answer that changes nothing and says nothing of the
	// sale (429 rate_limited).
	Refused
	// Wrong: an answer the contract never gives here (not_started for an
	// open sale, voucher_not_found for one that exists, a 4xx of no
	// meaning): the model accepts it in no state.
	Wrong
)

func (o Outcome) String() string {
	return [...]string{"unknown", "reserved", "held", "sold_out", "no_order", "stock", "refused", "wrong",
		"accepted", "not_yet", "denied", "paused", "ended"}[o]
}

// Output is an operation's answer.
type Output struct {
	Outcome Outcome
	OrderID int64 // Reserved, Held, and Unknown when the answer named one (unconfirmed)
	Stock   int64 // Stock
	// OrderStatus is a read order's status, Result a notice's result
	// (lifecycle.go).
	OrderStatus string
	Result      string
	// Status and Body describe the answer, for the report.
	Status int
	Body   string
	// Ret is the answer's time, for the lifecycle model (CheckLifecycle
	// stamps it).
	Ret int64
}

// Recorder collects operations from concurrent clients, timed on one
// monotonic clock.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// NewRecorder starts the history's clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the history's clock.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add records one operation of client, called at call.
func (r *Recorder) Add(client int, in Input, call int64, out Output) {
	ret := r.Now()
	if out.Outcome == Unknown {
		// It may take effect at any time after its call, even after the
		// history ends (a reservation still queued in Redis).
		ret = 1 << 62
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// Operations is the history so far.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// state is one voucher's sale as the sequential model has it: the stock
// left, each buyer's order (0: an order whose id no answer told), and
// whether an operator paused it; mixed: a pause or resume left unanswered
// reached part of the voucher's buckets (several masters: no one write
// reaches them all at once), so buys may meet either until the next
// answered one.
type state struct {
	stock  int64
	buyers map[int64]int64
	paused bool
	mixed  bool
	// ended: an operator ended the sale; endMixed: in part of its buckets
	// only, until the duty finishes it (steer.go).
	ended, endMixed bool
	// memoUntil: a sold-out answer called before it may be an instance's
	// memo of the sale before an operator added units (steer.go).
	memoUntil int64
}

func (s state) with(user, order int64, take bool) state {
	b := make(map[int64]int64, len(s.buyers)+1)
	for u, o := range s.buyers {
		b[u] = o
	}
	b[user] = order
	s.buyers = b
	if take {
		s.stock--
	}
	return s
}

// Model is a voucher sale with initial stock stock per voucher: one unit
// per buyer while stock lasts, a buyer's order the same forever, reads
// that see exactly that. Histories are partitioned by voucher.
func Model(stock int64) porcupine.Model { return model(stock, false) }

// BucketModel is Model for vouchers whose stock is split over buckets
// (core.Voucher.Buckets), which promise less of one answer: a shopper may
// be told sold out while a unit another bucket is about to lend remains
// (a bounded wait, which the bench measures), so a sold-out answer only
// says the shopper bought nothing; and a pause or resume answered 503 may
// have reached part of the buckets (on several masters) until the duty
// finishes it, or the next one answered 200. Every other rule stands: no unit sold
// twice or past the stock, one order per buyer, reads of the stock and of
// orders exactly as the sale is.
func BucketModel(stock int64) porcupine.Model { return model(stock, true) }

func model(stock int64, earlySoldOut bool) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Partition: byVoucher,
		Init:      func() []any { return []any{state{stock: stock, buyers: map[int64]int64{}}} },
		Step: func(st, input, output any) []any {
			s, in, out := st.(state), input.(Input), output.(Output)
			switch in.Kind {
			case Buy:
				return s.buy(in.User, in.At, out, earlySoldOut)
			case ReadStock:
				if out.Outcome == Unknown || out.Outcome == Refused || (out.Outcome == Stock && out.Stock == s.stock) {
					return []any{s}
				}
			case ReadOrder:
				return s.readOrder(in.User, out)
			case PauseSale, ResumeSale, ChangeStock, EndSale:
				return s.steered(in, out, earlySoldOut)
			}
			return nil
		},
		Equal: func(a, b any) bool { return a.(state).equal(b.(state)) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(Input), output.(Output)
			return fmt.Sprintf("%s(user %d, delta %d) -> %s %d/%d (%d %s)", in.Kind, in.User, in.Delta, out.Outcome, out.OrderID, out.Stock, out.Status, out.Body)
		},
		DescribeState: func(st any) string {
			s := st.(state)
			return fmt.Sprintf("stock %d, %d buyers, paused %v, ended %v", s.stock, len(s.buyers), s.paused, s.ended)
		},
	}
	return m.ToModel()
}

// byVoucher partitions a history by voucher: each voucher's sale is a
// model of its own.
func byVoucher(h []porcupine.Operation) [][]porcupine.Operation {
	by := map[int64][]porcupine.Operation{}
	for _, op := range h {
		v := op.Input.(Input).Voucher
		by[v] = append(by[v], op)
	}
	out := make([][]porcupine.Operation, 0, len(by))
	for _, ops := range by {
		out = append(out, ops)
	}
	return out
}

// sameOrder: the user holds an order, and id names it — the same as the
// model's, or the first name of one no answer had named.
func (s state) sameOrder(user, id int64) bool {
	held, holds := s.buyers[user]
	return holds && (held == id || held == 0)
}

// buy is the states a purchase answered out may leave (none: it cannot
// have been answered so from s).
func (s state) buy(user, at int64, out Output, earlySoldOut bool) []any {
	_, holds := s.buyers[user]
	switch out.Outcome {
	case Paused:
		if s.paused || s.mixed {
			return []any{s}
		}
	case Ended:
		if s.ended || s.endMixed {
			return []any{s}
		}
	case Reserved:
		if !holds && s.stock > 0 && s.selling() {
			return []any{s.with(user, out.OrderID, true)}
		}
		if s.sameOrder(user, out.OrderID) { // a replay of the same reservation
			return []any{s.with(user, out.OrderID, false)}
		}
	case Held:
		if s.sameOrder(user, out.OrderID) {
			return []any{s.with(user, out.OrderID, false)}
		}
	case SoldOut:
		if s.stock == 0 || earlySoldOut || at < s.memoUntil {
			return []any{s}
		}
	case Refused:
		return []any{s}
	case Unknown:
		next := []any{s} // it did nothing
		if !holds && s.stock > 0 && s.selling() {
			next = append(next, s.with(user, out.OrderID, true)) // it reserved
		}
		return next
	}
	return nil
}

// readOrder is the states an order read answered out may leave.
func (s state) readOrder(user int64, out Output) []any {
	_, holds := s.buyers[user]
	switch out.Outcome {
	case Held:
		if s.sameOrder(user, out.OrderID) {
			return []any{s.with(user, out.OrderID, false)}
		}
	case NoOrder:
		if !holds {
			return []any{s}
		}
	case Unknown, Refused:
		return []any{s}
	}
	return nil
}

// selling: a buy may reserve (not paused, or paused in part only; not
// ended, or ended in part only).
func (s state) selling() bool { return (!s.paused || s.mixed) && (!s.ended || s.endMixed) }

func (s state) equal(o state) bool {
	if s.stock != o.stock || s.paused != o.paused || s.mixed != o.mixed || s.ended != o.ended || s.endMixed != o.endMixed ||
		s.memoUntil != o.memoUntil || len(s.buyers) != len(o.buyers) {
		return false
	}
	for u, id := range s.buyers {
		if p, ok := o.buyers[u]; !ok || p != id {
			return false
		}
	}
	return true
}

// Check checks the history for linearizability, each voucher on its own,
// within timeout. The error says which voucher's history is not, with its
// operations around the point where no linearization goes further.
func Check(ops []porcupine.Operation, stock int64, timeout time.Duration) error {
	return CheckModel(Model(stock), ops, timeout)
}

// CheckModel is Check against another model (BucketModel).
func CheckModel(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) error {
	ops = stamped(boundUnknownBuys(withoutBlindReads(ops)))
	res := porcupine.CheckOperationsTimeout(model, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("history of %d operations: not decided within %v", len(ops), timeout)
	}
	return fmt.Errorf("history of %d operations is not linearizable: %s", len(ops), describeIllegal(model, ops))
}

// withoutBlindReads drops the reads that saw nothing: unanswered or
// refused, they changed nothing and constrain nothing (the model takes
// them as no-ops), but an unanswered one stays pending to the end of the
// history, and the checker tries it at every point after its call — the
// search grows with each. Around a cluster master's restart hundreds of
// requests go unanswered, and a history of 2000 operations was not
// decided within 3 minutes in CI.
func withoutBlindReads(ops []porcupine.Operation) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		in, res := o.Input.(Input), o.Output.(Output)
		if (in.Kind == ReadStock || in.Kind == ReadOrder) && (res.Outcome == Unknown || res.Outcome == Refused) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// boundUnknownBuys ends each unanswered buy where the history proves it
// could no longer reserve, and drops the ones that began after that: the
// verdict is the same, the search far smaller. An unanswered buy stays
// pending to the history's end, and the checker tries it, did-nothing or
// reserved, at every point after its call; around a cluster master's
// restart a history of 2000 operations with 200 of them was not decided
// within 3 minutes in CI.
//
// Why the verdict stands: in both models a buyer's order is forever, and
// a sold-out stock too unless an operator adds units (then not used), and a buy reserves only for a buyer with no order
// while stock is left. So if the buy reserved, it did so before any
// answer that shows its buyer holding an order (a reservation, an
// already_purchased, an order read) and before any stock read of 0 had
// returned; if it did nothing, it may be placed anywhere, there too.
// Shortening its interval to that point loses no linearization.
func boundUnknownBuys(ops []porcupine.Operation) []porcupine.Operation {
	type buyer struct{ voucher, user int64 }
	soldOutBy := map[int64]int64{} // voucher -> the earliest return of a stock read of 0
	holdsBy := map[buyer]int64{}   // the earliest return of an answer showing the buyer's order
	restocked := map[int64]bool{}  // vouchers an operator may have added units to: sold out is not forever
	for _, o := range ops {
		in, out := o.Input.(Input), o.Output.(Output)
		switch {
		case in.Kind == ChangeStock && in.Delta > 0 && out.Outcome != Denied:
			restocked[in.Voucher] = true
		case in.Kind == ReadStock && out.Outcome == Stock && out.Stock == 0:
			earliest(soldOutBy, in.Voucher, o.Return)
		case out.Outcome == Held || (in.Kind == Buy && out.Outcome == Reserved):
			earliest(holdsBy, buyer{in.Voucher, in.User}, o.Return)
		}
	}
	bounded := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		in := o.Input.(Input)
		if in.Kind != Buy || o.Output.(Output).Outcome != Unknown {
			bounded = append(bounded, o)
			continue
		}
		end := o.Return
		if t, ok := soldOutBy[in.Voucher]; ok && !restocked[in.Voucher] {
			end = min(end, t)
		}
		if t, ok := holdsBy[buyer{in.Voucher, in.User}]; ok {
			end = min(end, t)
		}
		if end < o.Call {
			continue // it began when it could no longer reserve: it did nothing
		}
		o.Return = max(end, o.Call+1)
		bounded = append(bounded, o)
	}
	return bounded
}

// earliest keeps at in m[k] if it is the first or earliest time seen.
func earliest[K comparable](m map[K]int64, k K, at int64) {
	if t, ok := m[k]; !ok || at < t {
		m[k] = at
	}
}

// maxListed bounds the operations a failure lists.
var maxListed = 60

// describeIllegal names the vouchers whose histories fail and lists, for
// the first, the operations no linearization could place.
func describeIllegal(model porcupine.Model, ops []porcupine.Operation) string {
	var failing []int64
	for _, part := range model.Partition(ops) {
		if !porcupine.CheckOperations(model, part) {
			failing = append(failing, part[0].Input.(Input).Voucher)
		}
	}
	sort.Slice(failing, func(i, j int) bool { return failing[i] < failing[j] })
	if len(failing) == 0 {
		return "(no single voucher fails on its own)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "vouchers %v; voucher %d's operations, by call:", failing, failing[0])
	var part []porcupine.Operation
	for _, op := range ops {
		if op.Input.(Input).Voucher == failing[0] {
			part = append(part, op)
		}
	}
	sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
	for i, op := range part {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  … %d more", len(part)-i)
			break
		}
		ret := "…"
		if op.Return < 1<<62 {
			ret = fmt.Sprintf("%.3fs", float64(op.Return)/1e9)
		}
		fmt.Fprintf(&b, "\n  [%.3fs, %s] client %d: %s", float64(op.Call)/1e9, ret, op.ClientId, model.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}

// stamped gives each operation its call and return times (Input.At,
// Output.Ret), which the model reads where an answer may lag the sale by
// a bounded time (an instance's memo after units were added).
func stamped(ops []porcupine.Operation) []porcupine.Operation {
	out := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		in, res := o.Input.(Input), o.Output.(Output)
		in.At, res.Ret = o.Call, o.Return
		o.Input, o.Output = in, res
		out[i] = o
	}
	return out
}
