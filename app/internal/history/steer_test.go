package history

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// steerOp is an operator's action on voucher 1.
func steerOp(kind Kind, delta, call, ret int64, out Output) porcupine.Operation {
	o := op(steerClient, kind, 0, call, ret, out)
	in := o.Input.(Input)
	in.Delta = delta
	o.Input = in
	return o
}

// TestTheModelLearnsTheOperatorsActions: no reservation between a pause's
// answer and its resume; paused answered only while paused; a stock
// change moves the stock read and sold exactly; one taking more than
// remains refused; an unanswered one may land (the duty finishes it).
func TestTheModelLearnsTheOperatorsActions(t *testing.T) {
	reserved := func(id int64) Output { return Output{Outcome: Reserved, OrderID: id} }
	stock := func(n int64) Output { return Output{Outcome: Stock, Stock: n} }
	accepted := Output{Outcome: Accepted}
	changed := func(left int64) Output { return Output{Outcome: Accepted, Stock: left} }
	paused, soldOut, unknown := Output{Outcome: Paused}, Output{Outcome: SoldOut}, Output{Outcome: Unknown}
	for _, c := range []struct {
		name  string
		legal bool
		ops   []porcupine.Operation
	}{
		{"paused, refused, resumed, sold", true, []porcupine.Operation{
			steerOp(PauseSale, 0, 0, 10, accepted), op(0, Buy, 1, 20, 30, paused),
			steerOp(ResumeSale, 0, 40, 50, accepted), op(0, Buy, 1, 60, 70, reserved(11)),
		}},
		{"a buy racing the pause may go either way", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 30, reserved(11)), steerOp(PauseSale, 0, 5, 20, accepted), op(1, Buy, 2, 10, 40, paused),
		}},
		{"ended: a buy after the end's answer is told so, for good", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), steerOp(EndSale, 0, 20, 30, accepted),
			op(0, Buy, 2, 40, 50, Output{Outcome: Ended}), op(1, ReadStock, 0, 60, 70, stock(1)),
		}},
		{"reserved after the end's answer", false, []porcupine.Operation{
			steerOp(EndSale, 0, 0, 10, accepted), op(0, Buy, 1, 20, 30, reserved(11)),
		}},
		{"ended with no end", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, Output{Outcome: Ended}),
		}},
		{"an unanswered end that landed later", true, []porcupine.Operation{
			steerOp(EndSale, 0, 0, -1, unknown), op(0, Buy, 1, 20, 30, reserved(11)), op(0, Buy, 2, 40, 50, Output{Outcome: Ended}),
		}},
		{"reserved after the pause's answer", false, []porcupine.Operation{
			steerOp(PauseSale, 0, 0, 10, accepted), op(0, Buy, 1, 20, 30, reserved(11)),
		}},
		{"paused with no pause", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, paused),
		}},
		{"paused after the resume's answer", false, []porcupine.Operation{
			steerOp(PauseSale, 0, 0, 10, accepted), steerOp(ResumeSale, 0, 20, 30, accepted), op(0, Buy, 1, 40, 50, paused),
		}},
		{"an unanswered pause that landed later", true, []porcupine.Operation{
			steerOp(PauseSale, 0, 0, -1, unknown), op(0, Buy, 1, 20, 30, reserved(11)), op(0, Buy, 2, 40, 50, paused),
		}},
		{"two added to a sold-out sale: two more sold, then sold out", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(0, Buy, 2, 20, 30, reserved(12)), op(0, Buy, 3, 40, 50, soldOut),
			steerOp(ChangeStock, 2, 60, 70, changed(2)), op(1, ReadStock, 0, 80, 90, stock(2)),
			op(0, Buy, 3, 100, 110, reserved(13)), op(0, Buy, 4, 120, 130, reserved(14)), op(0, Buy, 5, 140, 150, soldOut),
		}},
		{"sold past the stock added", false, []porcupine.Operation{
			steerOp(ChangeStock, 1, 0, 10, changed(3)),
			op(0, Buy, 1, 20, 30, reserved(11)), op(0, Buy, 2, 20, 30, reserved(12)), op(0, Buy, 3, 20, 30, reserved(13)), op(0, Buy, 4, 20, 30, reserved(14)),
		}},
		{"a stock read that missed the change", false, []porcupine.Operation{
			steerOp(ChangeStock, 1, 0, 10, changed(3)), op(1, ReadStock, 0, 20, 30, stock(2)),
		}},
		{"a change answering the wrong stock left", false, []porcupine.Operation{
			steerOp(ChangeStock, -1, 0, 10, changed(2)),
		}},
		{"sold out from an instance's memo just after units were added", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(0, Buy, 2, 20, 30, reserved(12)), op(0, Buy, 3, 40, 50, soldOut),
			steerOp(ChangeStock, 1, 60, 70, changed(1)), op(1, ReadStock, 0, 80, 90, stock(1)), op(0, Buy, 4, 100, 110, soldOut),
		}},
		{"sold out longer than the memo lives after units were added", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(0, Buy, 2, 20, 30, reserved(12)), op(0, Buy, 3, 40, 50, soldOut),
			steerOp(ChangeStock, 1, 60, 70, changed(1)), op(0, Buy, 4, 70+3e8, 80+3e8, soldOut),
		}},
		{"more taken than remains: refused, nothing changed", true, []porcupine.Operation{
			steerOp(ChangeStock, -3, 0, 10, Output{Outcome: Denied}), op(1, ReadStock, 0, 20, 30, stock(2)),
		}},
		{"refused with enough left", false, []porcupine.Operation{
			steerOp(ChangeStock, -1, 0, 10, Output{Outcome: Denied}),
		}},
	} {
		err := Check(c.ops, 2, 5*time.Second)
		if c.legal && err != nil {
			t.Errorf("%s: refused a correct sale: %v", c.name, err)
		}
		if !c.legal && (err == nil || !strings.Contains(err.Error(), "not linearizable")) {
			t.Errorf("%s: accepted (%v)", c.name, err)
		}
	}
}

// TestTheSettledColumnCountsTheStockChanges: the column must be the stock
// less the rows, moved by the changes answered and by some of those left
// unanswered, not by anything else.
func TestTheSettledColumnCountsTheStockChanges(t *testing.T) {
	d := &stockDeltas{}
	d.add(3, Accepted)
	d.add(-1, Accepted)
	d.add(5, Denied)
	d.add(2, Unknown)
	d.add(-1, Unknown)
	for moved, want := range map[int64]bool{2: true, 4: true, 1: true, 3: true, 0: false, 7: false, 5: false} {
		if got := d.explain(moved); got != want {
			t.Errorf("moved %d: explained %v, want %v", moved, got, want)
		}
	}
}

// TestAPauseUnansweredMayReachPartOfTheBuckets: a pause answered 503 on a
// voucher in buckets may have reached some buckets only (until the duty
// finishes it): a paused answer, then a reservation, is legal there, and
// not for a whole voucher, where one write pauses it; after a pause
// answered 200, no reservation in either.
func TestAPauseUnansweredMayReachPartOfTheBuckets(t *testing.T) {
	reserved := func(id int64) Output { return Output{Outcome: Reserved, OrderID: id} }
	paused, unknown := Output{Outcome: Paused}, Output{Outcome: Unknown}
	part := []porcupine.Operation{steerOp(PauseSale, 0, 0, -1, unknown), op(0, Buy, 1, 20, 30, paused), op(0, Buy, 2, 40, 50, reserved(12))}
	answered := []porcupine.Operation{steerOp(PauseSale, 0, 0, -1, unknown), steerOp(PauseSale, 0, 5, 10, Output{Outcome: Accepted}),
		op(0, Buy, 1, 20, 30, paused), op(0, Buy, 2, 40, 50, reserved(12))}
	for _, c := range []struct {
		name          string
		ops           []porcupine.Operation
		whole, bucket bool
	}{
		{"paused, then reserved, after a pause unanswered", part, false, true},
		{"reserved after a pause answered 200", answered, false, false},
	} {
		if err := CheckModel(Model(2), c.ops, 5*time.Second); (err == nil) != c.whole {
			t.Errorf("%s, whole voucher: legal=%v, want %v (%v)", c.name, err == nil, c.whole, err)
		}
		if err := CheckModel(BucketModel(2), c.ops, 5*time.Second); (err == nil) != c.bucket {
			t.Errorf("%s, in buckets: legal=%v, want %v (%v)", c.name, err == nil, c.bucket, err)
		}
	}
}
