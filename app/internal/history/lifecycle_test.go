package history

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// lop is a lifecycle operation of voucher 1 on order from call to ret
// (ret < 0: no answer).
func lop(client int, kind Kind, user, order int64, call, ret int64, out Output) porcupine.Operation {
	o := op(client, kind, user, call, ret, out)
	in := o.Input.(Input)
	in.Order = order
	o.Input = in
	return o
}

// noticeOp is a notice of order from call to ret.
func noticeOp(client int, user, order int64, txn string, succeeded bool, call, ret int64, out Output) porcupine.Operation {
	o := lop(client, Notify, user, order, call, ret, out)
	in := o.Input.(Input)
	in.Txn, in.Succeeded = txn, succeeded
	o.Input = in
	return o
}

// completeOp is the shopper at the sandbox's page for order.
func completeOp(client int, user, order int64, succeeded bool, call, ret int64, out Output) porcupine.Operation {
	o := lop(client, Complete, user, order, call, ret, out)
	in := o.Input.(Input)
	in.Succeeded = succeeded
	o.Input = in
	return o
}

// refundOp is an operator's refund of order.
func refundOp(client int, user, order int64, returnUnit bool, call, ret int64, out Output) porcupine.Operation {
	o := lop(client, Refund, user, order, call, ret, out)
	in := o.Input.(Input)
	in.ReturnUnit = returnUnit
	o.Input = in
	return o
}

// TestTheLifecycleModelKnowsTheProvidersWordAndRefunds: money taken whose
// notice is lost is heard later — before the deadline it pays the order
// and keeps it from expiring, after it the order expires and the money
// goes back; an operator's refund takes a paid order to refunded once,
// with its unit back or kept. And the defects of each are refused.
func TestTheLifecycleModelKnowsTheProvidersWordAndRefunds(t *testing.T) {
	const window = 100
	reserved := func(id int64) Output { return Output{Outcome: Reserved, OrderID: id} }
	held := func(id int64) Output { return Output{Outcome: Held, OrderID: id} }
	status := func(id int64, s string) Output { return Output{Outcome: Held, OrderID: id, OrderStatus: s} }
	stock := func(n int64) Output { return Output{Outcome: Stock, Stock: n} }
	took := func(result string) Output { return Output{Outcome: Accepted, OrderStatus: "succeeded", Result: result} }
	accepted, denied := Output{Outcome: Accepted}, Output{Outcome: Denied}
	for _, c := range []struct {
		name  string
		legal bool
		ops   []porcupine.Operation
	}{
		{"taken before the deadline, the notice lost: paid, never expired", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 10, 12, took("")),
			op(0, ReadOrder, 1, 20, 21, status(11, "created")), op(0, ReadOrder, 1, 300, 302, status(11, "paid")),
		}},
		{"taken after the deadline, the notice lost: expired, the money back", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 104, 106, took("")),
			op(0, ReadOrder, 1, 200, 201, status(11, "cancelled")), op(0, ReadOrder, 1, 300, 302, status(11, "refunded")),
		}},
		{"taken after the deadline and heard before the expiry: paid", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 104, 106, took("")),
			op(0, ReadOrder, 1, 300, 302, status(11, "paid")),
		}},
		{"the notice after the reconciliation heard it: already recorded", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 10, 30, took("already_recorded")),
			op(0, ReadOrder, 1, 31, 32, status(11, "paid")),
		}},
		{"a second payment of a paid order refused at the page", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 10, 12, took("paid")),
			completeOp(0, 1, 11, true, 13, 14, denied),
		}},
		{"refunded with its unit: sold again, bought again", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 10, 12, took("paid")),
			refundOp(1, 1, 11, true, 20, 22, accepted), refundOp(2, 1, 11, true, 21, 23, accepted),
			op(0, ReadOrder, 1, 24, 25, status(11, "refunded")), op(1, ReadStock, 0, 40, 41, stock(1)), op(0, Buy, 1, 42, 43, reserved(12)),
		}},
		{"refunded with its unit kept: the shopper still holds it", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 10, 12, took("paid")),
			refundOp(1, 1, 11, false, 20, 22, accepted), op(1, ReadStock, 0, 400, 401, stock(0)), op(0, Buy, 1, 402, 403, held(11)),
		}},
		{"an unpaid order is not refundable", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), refundOp(1, 1, 11, true, 20, 22, denied),
		}},
		{"money taken before the deadline, and the order expired", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 10, 12, took("")),
			op(0, ReadOrder, 1, 300, 302, status(11, "cancelled")),
		}},
		{"money heard without any taken", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), op(0, ReadOrder, 1, 50, 52, status(11, "paid")),
		}},
		{"a refund of an unpaid order", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), refundOp(1, 1, 11, true, 20, 22, accepted),
		}},
		{"a refund's unit back twice", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 10, 12, took("paid")),
			refundOp(1, 1, 11, true, 20, 22, accepted), refundOp(2, 1, 11, true, 23, 24, accepted), op(1, ReadStock, 0, 40, 41, stock(2)),
		}},
		{"a kept unit sold again", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted), completeOp(0, 1, 11, true, 10, 12, took("paid")),
			refundOp(1, 1, 11, false, 20, 22, accepted), op(1, ReadStock, 0, 400, 401, stock(1)),
		}},
	} {
		err := CheckLifecycle(c.ops, 1, window, 5*time.Second)
		if c.legal && err != nil {
			t.Errorf("%s: refused a correct lifecycle: %v", c.name, err)
		}
		if !c.legal && (err == nil || !strings.Contains(err.Error(), "not linearizable")) {
			t.Errorf("%s: accepted (%v)", c.name, err)
		}
	}
}

// TestTheLifecycleModelTellsALifecycleFromItsDefects: the lifecycle model
// accepts what a correct sale may answer while orders are paid,
// cancelled, expired and bought again, and refuses each defect of the
// contract's lifecycle — the /pay 404 the outside checker found first.
func TestTheLifecycleModelTellsALifecycleFromItsDefects(t *testing.T) {
	const window = 100 // the pay window, in the history's clock
	reserved := func(id int64) Output { return Output{Outcome: Reserved, OrderID: id} }
	held := func(id int64) Output { return Output{Outcome: Held, OrderID: id} }
	status := func(id int64, s string) Output { return Output{Outcome: Held, OrderID: id, OrderStatus: s} }
	stock := func(n int64) Output { return Output{Outcome: Stock, Stock: n} }
	result := func(r string) Output { return Output{Outcome: Accepted, Result: r} }
	accepted, notYet, denied := Output{Outcome: Accepted}, Output{Outcome: NotYet}, Output{Outcome: Denied}
	soldOut, noOrder, unknown := Output{Outcome: SoldOut}, Output{Outcome: NoOrder}, Output{Outcome: Unknown}
	for _, c := range []struct {
		name  string
		legal bool
		ops   []porcupine.Operation
	}{
		{"paid: then neither cancelled nor expired", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 9, notYet), lop(0, Pay, 1, 11, 10, 12, accepted),
			noticeOp(1, 1, 11, "t1", true, 13, 15, result("paid")), noticeOp(1, 1, 11, "t1", true, 16, 18, result("already_recorded")),
			lop(0, Cancel, 1, 11, 20, 22, denied), op(0, ReadOrder, 1, 300, 302, status(11, "paid")),
		}},
		{"cancelled: the unit sold again at once, the shopper buys again", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), op(1, Buy, 2, 6, 8, soldOut), lop(0, Cancel, 1, 11, 10, 20, accepted),
			op(1, ReadStock, 0, 21, 22, stock(1)), op(0, ReadOrder, 1, 23, 24, status(11, "cancelled")),
			op(0, Buy, 1, 25, 26, reserved(12)), noticeOp(2, 1, 11, "t1", true, 27, 28, result("refunded")),
		}},
		{"expired at its deadline, its unit back some time after", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), op(0, ReadOrder, 1, 50, 52, status(11, "created")),
			op(0, ReadOrder, 1, 110, 112, status(11, "cancelled")), op(1, ReadStock, 0, 113, 114, stock(0)),
			op(0, Buy, 1, 115, 116, held(11)), op(1, ReadStock, 0, 130, 131, stock(1)), op(0, Buy, 1, 132, 133, reserved(12)),
			op(0, ReadOrder, 1, 134, 135, status(12, "queued")),
		}},
		{"a cancel and a payment racing: one wins, the money goes back", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted),
			lop(0, Cancel, 1, 11, 10, 30, accepted), noticeOp(1, 1, 11, "t1", true, 11, 29, result("refunded")),
			op(0, ReadOrder, 1, 31, 32, status(11, "refunded")),
		}},
		{"an unanswered cancel that did cancel", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Cancel, 1, 11, 6, -1, unknown),
			op(0, ReadOrder, 1, 20, 21, status(11, "cancelled")), op(0, ReadStock, 0, 40, 41, stock(1)),
		}},
		{"/pay of the shopper's own order answered 404", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, noOrder), op(0, ReadOrder, 1, 9, 10, status(11, "created")),
		}},
		{"expired before its deadline", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), op(0, ReadOrder, 1, 50, 52, status(11, "cancelled")),
		}},
		{"cancelled and paid both", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted),
			lop(0, Cancel, 1, 11, 10, 12, accepted), noticeOp(1, 1, 11, "t1", true, 13, 15, result("paid")),
		}},
		{"a unit back twice", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Cancel, 1, 11, 10, 12, accepted), op(1, ReadStock, 0, 40, 41, stock(2)),
		}},
		{"a cancel answered before its unit is back", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Cancel, 1, 11, 10, 12, accepted), op(1, ReadStock, 0, 13, 14, stock(0)),
		}},
		{"the mark outlives the cancel's answer", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Cancel, 1, 11, 10, 12, accepted), op(0, Buy, 1, 13, 14, held(11)),
		}},
		{"one notice recorded twice", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted),
			noticeOp(1, 1, 11, "t1", true, 13, 15, result("paid")), noticeOp(1, 1, 11, "t1", true, 16, 18, result("refunded")),
		}},
		{"still being recorded after it was seen recorded", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), op(0, ReadOrder, 1, 6, 7, status(11, "created")), lop(0, Cancel, 1, 11, 8, 9, notYet),
		}},
		{"a paid order expired", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 5, reserved(11)), lop(0, Pay, 1, 11, 6, 8, accepted),
			noticeOp(1, 1, 11, "t1", true, 13, 15, result("paid")), op(0, ReadOrder, 1, 300, 302, status(11, "cancelled")),
		}},
	} {
		err := CheckLifecycle(c.ops, 1, window, 5*time.Second)
		if c.legal && err != nil {
			t.Errorf("%s: refused a correct lifecycle: %v", c.name, err)
		}
		if !c.legal && (err == nil || !strings.Contains(err.Error(), "not linearizable")) {
			t.Errorf("%s: accepted (%v)", c.name, err)
		}
	}
}
