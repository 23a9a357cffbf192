package history

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The order lifecycle's check: besides buying and reading, shoppers pay
// (/pay, then the provider's signed notice, sometimes twice), cancel, and
// let orders expire, and buy again what came back. Its model is the
// contract's lifecycle, strictly:
//   - exactly one of pay, cancel and expiry wins for an order;
//   - a shopper's cancel gives the unit back before it answers (stock,
//     and the one-per-user mark: they may buy again);
//   - an expiry happens no earlier than the order's deadline (its
//     reservation + the pay window) and gives the unit back once, at
//     some time after;
//   - a notice is recorded once by its transaction id; a succeeded one
//     pays an unpaid order and refunds anything else;
//   - /pay and /cancel of the shopper's own order never answer 404; they
//     may say "still being recorded" only of an order no answer has shown
//     persisted;
//   - the provider's word decides, not whether its notice arrived: money
//     the sandbox took (Complete) whose notice was lost or late is heard
//     some time later (the question before the order expires, the
//     reconciliation, the late notice): it pays an unpaid order, and a
//     cancelled one's goes back (refunded). Money taken surely before the
//     order's deadline keeps it from expiring unpaid;
//   - an operator's refund (Refund) takes a paid order to refunded, once,
//     its unit back some time after or kept sold (the shopper's mark
//     stays with it).
//
// Expiries and the units' return are the server's own doing, not a
// call's: the model lets them happen, each when it may, before any
// operation, and the operations' answers decide which happened.

// Lifecycle operations, beside Buy, ReadStock and ReadOrder.
const (
	// Pay is POST /api/orders/{order}/pay.
	Pay Kind = iota + ReadOrder + 1
	// Notify is the provider's POST /api/payments/sandbox/notify for the
	// order's payment: Input.Txn, Input.Succeeded.
	Notify
	// Cancel is POST /api/orders/{order}/cancel.
	Cancel
)

// Kinds of the provider's word and the operator's refunds (after the
// steering's, whose values are kept in saved histories).
const (
	// Complete is the shopper at the sandbox's page: POST
	// /api/payments/sandbox/{payment}/complete, Input.Succeeded paying or
	// failing; its notice may be lost or late.
	Complete Kind = iota + EndSale + 1
	// Refund is an operator's POST /api/admin/orders/{order}/refund,
	// Input.ReturnUnit putting the unit back on sale.
	Refund
)

// Lifecycle outcomes, beside those of the sale.
const (
	// Accepted: 200 to /pay (a payment started), /cancel (cancelled) and
	// the notice (Output.Result says what it did).
	Accepted Outcome = Wrong + 1 + iota
	// NotYet: 409 "still being recorded" (not_payable, not_cancellable)
	// for an order the consumer has not persisted.
	NotYet
	// Denied: 409 not_payable / not_cancellable for an order paid or
	// cancelled.
	Denied
)

// orderState is where an order is in its lifecycle.
type orderState byte

const (
	unpaid orderState = iota
	paid
	cancelled
	refunded // cancelled, then paid: the money went back
	returned // paid, then refunded by an operator
)

// never is a time no operation reaches.
const never = 1 << 62

// lifeOrder is one order as the model has it.
type lifeOrder struct {
	id, user int64 // id 0: reserved by a call no answer told of
	state    orderState
	// persisted: an answer showed the order in the database (it can no
	// longer be "still being recorded").
	persisted bool
	// released: a cancelled order's unit is back on sale. releaseBy: the
	// latest time it may come back (a shopper's cancel gives it back
	// before it answers; an expiry, some time after).
	released  bool
	releaseBy int64
	// dueFrom: the earliest its deadline can be (the reservation's call
	// plus the pay window).
	dueFrom int64
	txns    []string // notices recorded, sorted
	// moneyBy: money the provider took that the shop has not heard of
	// yet, taken by then at the latest (0: none; never: when is unknown).
	moneyBy int64
	// kept: returned with its unit kept sold: its mark is never released.
	kept bool
}

// holds: the order still carries its buyer's mark (live, or cancelled and
// its unit not back yet).
func (o lifeOrder) holds() bool { return o.state == unpaid || o.state == paid || !o.released }

// lifeState is one voucher's sale and its orders.
type lifeState struct {
	stock  int64
	orders []lifeOrder
}

func (s lifeState) clone() lifeState {
	c := lifeState{stock: s.stock, orders: slices.Clone(s.orders)}
	return c
}

// key is the state, canonically: equal states, equal keys.
func (s lifeState) key() string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(s.stock, 10))
	for _, o := range s.orders {
		fmt.Fprintf(&b, "|%d:%d:%d:%t:%t:%d:%s:%d:%t", o.id, o.user, o.state, o.persisted, o.released, o.releaseBy, strings.Join(o.txns, ","), o.moneyBy, o.kept)
	}
	return b.String()
}

// held is the index of the order carrying user's mark, or -1.
func (s lifeState) held(user int64) int {
	for i, o := range s.orders {
		if o.user == user && o.holds() {
			return i
		}
	}
	return -1
}

// last is the index of user's newest order, or -1.
func (s lifeState) last(user int64) int {
	for i := len(s.orders) - 1; i >= 0; i-- {
		if s.orders[i].user == user {
			return i
		}
	}
	return -1
}

// find is the index of user's order id, or -1; an order no answer had
// told of, at index at, takes the id. Call it on a clone: it binds in
// place.
func (s lifeState) find(user, id int64, at int) int {
	for i, o := range s.orders {
		if o.id == id {
			if o.user != user {
				return -1
			}
			return i
		}
	}
	if at >= 0 && s.orders[at].id == 0 {
		s.orders[at].id = id
		return at
	}
	return -1
}

// happenings are the states the server's own doings may lead to before an
// operation called at `call` and answered at `ret`: any due unpaid order
// expired, any money taken heard, any cancelled order's unit back — and
// every unit whose return was due before the call, back.
func (s lifeState) happenings(call, ret int64) []lifeState {
	out := []lifeState{s.clone()}
	for i := range s.orders {
		var next []lifeState
		for _, st := range out {
			for _, o := range st.orders[i].futures(call, ret) {
				n := st.clone()
				if o.released && !n.orders[i].released {
					n.stock++
				}
				n.orders[i] = o
				next = append(next, n)
			}
		}
		out = next
	}
	return out
}

// futures are what the server's own doings may make of the order by an
// operation called at `call` and answered at `ret`.
func (o lifeOrder) futures(call, ret int64) []lifeOrder {
	out := []lifeOrder{o}
	// Expired: due, and no money taken surely before its deadline (the
	// expiry asks the provider first, and such money pays it).
	if o.state == unpaid && o.dueFrom <= ret && (o.moneyBy == 0 || o.moneyBy > o.dueFrom) {
		exp := o
		exp.state, exp.releaseBy, exp.persisted = cancelled, never, true
		out = append(out, exp)
	}
	if o.moneyBy != 0 {
		for _, v := range out {
			out = append(out, v.heard())
		}
	}
	var final []lifeOrder
	for _, v := range out {
		if v.state == unpaid || v.state == paid || v.released || v.kept {
			final = append(final, v)
			continue
		}
		back := v
		back.released = true
		final = append(final, back)
		if v.releaseBy >= call {
			final = append(final, v)
		}
	}
	return final
}

// heard is the order once the shop heard of money taken for it: an unpaid
// order paid, a cancelled one's money given back; any other's money goes
// back and the order is as it was.
func (o lifeOrder) heard() lifeOrder {
	switch o.state {
	case unpaid:
		o.state, o.persisted = paid, true
	case cancelled:
		o.state = refunded
	}
	o.moneyBy = 0
	return o
}

// withMoney is the order with money taken by `by` the shop has not heard
// of: only an unpaid or a cancelled order's changes anything later.
func (o lifeOrder) withMoney(by int64) lifeOrder {
	if o.state == unpaid || o.state == cancelled {
		if o.moneyBy == 0 || by < o.moneyBy {
			o.moneyBy = by
		}
	}
	o.persisted = true // a payment was started: the order is a row
	return o
}

// step is the operation's effect on one state: the states it may leave.
func (s lifeState) step(in Input, out Output, window int64) []lifeState {
	switch in.Kind {
	case Buy:
		return s.buy(in, out, window)
	case ReadStock:
		if out.Outcome == Stock && out.Stock == s.stock || out.Outcome == Unknown || out.Outcome == Refused {
			return []lifeState{s}
		}
	case ReadOrder:
		return s.readOrder(in, out)
	case Pay, Cancel:
		return s.payOrCancel(in, out)
	case Notify:
		return s.notify(in, out)
	case Complete:
		return s.complete(in, out)
	case Refund:
		return s.refund(in, out)
	}
	return nil
}

func (s lifeState) buy(in Input, out Output, window int64) []lifeState {
	h := s.held(in.User)
	reserve := func(id int64) lifeState {
		n := s.clone()
		n.stock--
		n.orders = append(n.orders, lifeOrder{id: id, user: in.User, dueFrom: in.At + window})
		return n
	}
	n := s.clone()
	switch out.Outcome {
	case Reserved:
		if h < 0 && s.stock > 0 {
			return []lifeState{reserve(out.OrderID)}
		}
		if h >= 0 && n.find(in.User, out.OrderID, h) == h { // a replay of the same reservation
			return []lifeState{n}
		}
	case Held:
		if h >= 0 && n.find(in.User, out.OrderID, h) == h {
			return []lifeState{n}
		}
	case SoldOut:
		if s.stock == 0 {
			return []lifeState{s}
		}
	case Refused:
		return []lifeState{s}
	case Unknown:
		if h < 0 && s.stock > 0 {
			return []lifeState{s, reserve(out.OrderID)}
		}
		return []lifeState{s}
	}
	return nil
}

// statusShows: an order in state o may be shown as status.
func statusShows(o lifeOrder, status string) bool {
	switch status {
	case "queued":
		return o.state == unpaid && !o.persisted
	case "created":
		return o.state == unpaid
	case "paid":
		return o.state == paid
	case "cancelled":
		return o.state == cancelled
	case "refunded":
		return o.state == refunded || o.state == returned
	}
	return false
}

func (s lifeState) readOrder(in Input, out Output) []lifeState {
	switch out.Outcome {
	case NoOrder:
		if s.last(in.User) < 0 {
			return []lifeState{s}
		}
	case Held:
		// The order the mark is on, or else the shopper's last, cancelled.
		i := s.held(in.User)
		if i < 0 {
			i = s.last(in.User)
		}
		n := s.clone()
		if i >= 0 && n.find(in.User, out.OrderID, i) == i && statusShows(n.orders[i], out.OrderStatus) {
			n.orders[i].persisted = n.orders[i].persisted || out.OrderStatus != "queued"
			return []lifeState{n}
		}
	case Unknown, Refused:
		return []lifeState{s}
	}
	return nil
}

func (s lifeState) payOrCancel(in Input, out Output) []lifeState {
	n := s.clone()
	i := n.find(in.User, in.Order, n.held(in.User))
	if i < 0 {
		return nil // the driver pays and cancels only orders answered to the shopper
	}
	o := n.orders[i]
	switch out.Outcome {
	case Accepted:
		if o.state != unpaid {
			return nil
		}
		c := n.clone()
		c.orders[i].persisted = true
		if in.Kind == Cancel {
			c.orders[i].state, c.orders[i].releaseBy = cancelled, out.Ret
		}
		return []lifeState{c}
	case NotYet:
		if o.state == unpaid && !o.persisted {
			return []lifeState{n}
		}
	case Denied:
		if o.state != unpaid {
			return []lifeState{n}
		}
	case Unknown:
		if in.Kind == Cancel && o.state == unpaid {
			c := n.clone()
			c.orders[i].state, c.orders[i].releaseBy, c.orders[i].persisted = cancelled, 1<<62, true
			return []lifeState{n, c}
		}
		return []lifeState{n}
	case Refused:
		return []lifeState{n}
	}
	return nil
}

func (s lifeState) notify(in Input, out Output) []lifeState {
	n := s.clone()
	i := n.find(in.User, in.Order, n.held(in.User))
	if i < 0 {
		return nil
	}
	n.orders[i].persisted = true // a payment was started: the order is a row
	if slices.Contains(n.orders[i].txns, in.Txn) {
		if out.Outcome == Unknown || out.Outcome == Accepted && out.Result == "already_recorded" {
			return []lifeState{n}
		}
		return nil
	}
	was := n.clone()
	o := &n.orders[i]
	o.txns = append(slices.Clone(o.txns), in.Txn)
	sort.Strings(o.txns)
	result := "failed"
	if in.Succeeded {
		switch o.state {
		case unpaid:
			o.state, result = paid, "paid"
		case cancelled:
			o.state, result = refunded, "refunded"
		default: // paid already, or refunded: this money goes back too
			result = "refunded"
		}
	}
	switch {
	case out.Outcome == Accepted && out.Result == result:
		return []lifeState{n}
	case out.Outcome == Accepted && out.Result == "already_recorded":
		// The shop heard the provider's word on this transaction first —
		// its answer to the question asked before the order expired, or
		// the reconciliation's — between the notice's verification (the
		// provider's books have it from then) and its record: the same
		// transition, recorded once.
		return []lifeState{n}
	case out.Outcome == Unknown && in.Succeeded:
		// Verified (the provider's books have the charge) and perhaps not
		// recorded: the shop hears of it later, or has.
		w := was.clone()
		w.orders[i] = w.orders[i].withMoney(never)
		return []lifeState{w, n}
	case out.Outcome == Unknown:
		return []lifeState{was, n}
	}
	return nil
}

// complete is the shopper paying (or failing) at the sandbox: Output's
// OrderStatus is the payment's state as the sandbox answered (succeeded:
// money taken, now or by an earlier attempt), Result the shop's answer to
// the notice when it was sent and answered ("" when lost, late or
// retried).
func (s lifeState) complete(in Input, out Output) []lifeState {
	n := s.clone()
	i := n.find(in.User, in.Order, n.held(in.User))
	if i < 0 {
		return nil
	}
	o := n.orders[i]
	switch out.Outcome {
	case Accepted:
		if out.OrderStatus != "succeeded" {
			n.orders[i].persisted = true
			return []lifeState{n} // failed: nothing taken, nothing changes
		}
		switch out.Result {
		case "":
			n.orders[i] = o.withMoney(out.Ret)
			return []lifeState{n}
		case "paid":
			if o.state != unpaid {
				return nil
			}
		case "refunded":
			if o.state == unpaid {
				return nil
			}
		case "already_recorded":
		default:
			return nil
		}
		n.orders[i] = o.withMoney(out.Ret).heard()
		return []lifeState{n}
	case Denied: // the sandbox takes nothing for an order the shop has the money of
		if o.state == paid || o.state == refunded || o.state == returned {
			return []lifeState{n}
		}
	case Unknown:
		if in.Succeeded {
			m := n.clone()
			m.orders[i] = o.withMoney(never)
			return []lifeState{n, m}
		}
		return []lifeState{n}
	case Refused:
		return []lifeState{n}
	}
	return nil
}

// refund is an operator's refund of the order: a paid one is refunded
// (once: asked again, or of one whose late money went back, it answers
// done), its unit back some time after or kept; anything else is not
// refundable.
func (s lifeState) refund(in Input, out Output) []lifeState {
	n := s.clone()
	i := n.find(in.User, in.Order, n.held(in.User))
	if i < 0 {
		return nil
	}
	o := n.orders[i]
	given := n.clone()
	r := &given.orders[i]
	r.state, r.releaseBy, r.kept, r.moneyBy = returned, never, !in.ReturnUnit, 0
	switch out.Outcome {
	case Accepted:
		switch o.state {
		case paid:
			return []lifeState{given}
		case returned, refunded:
			return []lifeState{n}
		}
	case Denied:
		if o.state == unpaid || o.state == cancelled {
			return []lifeState{n}
		}
	case Unknown:
		if o.state == paid {
			return []lifeState{n, given}
		}
		return []lifeState{n}
	case Refused:
		return []lifeState{n}
	}
	return nil
}

// lifeStates is the model's state: every state the history so far may
// have left, by key.
type lifeStates struct {
	key    string
	states []lifeState
}

func newLifeStates(states []lifeState) lifeStates {
	by := make(map[string]lifeState, len(states))
	for _, s := range states {
		by[s.key()] = s
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := lifeStates{key: strings.Join(keys, "\n"), states: make([]lifeState, len(keys))}
	for i, k := range keys {
		out.states[i] = by[k]
	}
	return out
}

// LifecycleModel is the order lifecycle's sale: stock units per voucher,
// window the time to pay. Histories are partitioned by voucher; the
// operations must be stamped (CheckLifecycle does it).
func LifecycleModel(stock int64, window time.Duration) porcupine.Model {
	return porcupine.Model{
		Partition: Model(stock).Partition,
		Init: func() any {
			return newLifeStates([]lifeState{{stock: stock}})
		},
		Step: func(st, input, output any) (bool, any) {
			in, out := input.(Input), output.(Output)
			var next []lifeState
			for _, s := range st.(lifeStates).states {
				for _, h := range s.happenings(in.At, out.Ret) {
					next = append(next, h.step(in, out, int64(window))...)
				}
			}
			if len(next) == 0 {
				return false, st
			}
			return true, newLifeStates(next)
		},
		Equal: func(a, b any) bool { return a.(lifeStates).key == b.(lifeStates).key },
		Hash: func(st any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(st.(lifeStates).key))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(Input), output.(Output)
			what := fmt.Sprintf("%s(user %d", in.Kind, in.User)
			if in.Order != 0 {
				what += fmt.Sprintf(", order %d", in.Order)
			}
			switch in.Kind {
			case Notify:
				what += fmt.Sprintf(", txn %s, succeeded %t", in.Txn, in.Succeeded)
			case Complete:
				what += fmt.Sprintf(", succeeded %t", in.Succeeded)
			case Refund:
				what += fmt.Sprintf(", unit back %t", in.ReturnUnit)
			}
			return fmt.Sprintf("%s) -> %s %d %s%s/%d (%d %s)", what, out.Outcome, out.OrderID, out.OrderStatus, out.Result, out.Stock, out.Status, out.Body)
		},
		DescribeState: func(st any) string {
			return fmt.Sprintf("%d possible states", len(st.(lifeStates).states))
		},
	}
}

// CheckLifecycle checks a lifecycle history (DriveLifecycle's) against
// LifecycleModel, each voucher on its own, within timeout.
func CheckLifecycle(ops []porcupine.Operation, stock int64, window, timeout time.Duration) error {
	stamped := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		in, out := o.Input.(Input), o.Output.(Output)
		blind := out.Outcome == Unknown && (in.Kind == ReadStock || in.Kind == ReadOrder || in.Kind == Pay)
		if blind || out.Outcome == Refused {
			continue // changed nothing, and says nothing (see withoutBlindReads)
		}
		in.At, out.Ret = o.Call, o.Return
		o.Input, o.Output = in, out
		stamped = append(stamped, o)
	}
	model := LifecycleModel(stock, window)
	switch porcupine.CheckOperationsTimeout(model, stamped, timeout) {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("lifecycle history of %d operations: not decided within %v", len(stamped), timeout)
	}
	return fmt.Errorf("lifecycle history of %d operations is not linearizable: %s", len(stamped), describeStuck(model, stamped, timeout))
}

// describeStuck tells where the first failing voucher's history gets
// stuck: the end of the longest linearization found, then the operations
// none could place after it, earliest called first.
func describeStuck(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) string {
	for _, part := range model.Partition(ops) {
		res, info := porcupine.CheckOperationsVerbose(model, part, timeout)
		if res == porcupine.Ok {
			continue
		}
		var longest []int
		for _, lin := range info.PartialLinearizations()[0] {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
		placed := map[int]bool{}
		for _, i := range longest {
			placed[i] = true
		}
		at := func(t int64) string {
			if t >= never {
				return "…"
			}
			return fmt.Sprintf("%.3fs", float64(t)/1e9)
		}
		line := func(o porcupine.Operation) string {
			return fmt.Sprintf("\n  [%s, %s] client %d: %s", at(o.Call), at(o.Return), o.ClientId, model.DescribeOperation(o.Input, o.Output))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "voucher %d: %d of %d operations linearized; the last of them:", part[0].Input.(Input).Voucher, len(longest), len(part))
		for _, i := range longest[max(0, len(longest)-12):] {
			b.WriteString(line(part[i]))
		}
		b.WriteString("\nthen none of these could be next:")
		var rest []porcupine.Operation
		for i, o := range part {
			if !placed[i] {
				rest = append(rest, o)
			}
		}
		sort.Slice(rest, func(i, j int) bool { return rest[i].Call < rest[j].Call })
		for _, o := range rest[:min(len(rest), 12)] {
			b.WriteString(line(o))
		}
		return b.String()
	}
	return "(no single voucher fails on its own)"
}

// Describe lists a history's operations by call, one a line, for a
// failure's report.
func Describe(ops []porcupine.Operation) string {
	model := LifecycleModel(0, 0)
	sorted := slices.Clone(ops)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	var b strings.Builder
	for _, o := range sorted {
		ret := "…"
		if o.Return < 1<<62 {
			ret = fmt.Sprintf("%.3fs", float64(o.Return)/1e9)
		}
		fmt.Fprintf(&b, "voucher %d [%.3fs, %s] client %d: %s\n", o.Input.(Input).Voucher, float64(o.Call)/1e9, ret, o.ClientId, model.DescribeOperation(o.Input, o.Output))
	}
	return b.String()
}
