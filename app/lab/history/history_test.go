package history

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op is an operation of voucher 1 from call to ret (ret < 0: no answer).
func op(client int, kind Kind, user int64, call, ret int64, out Output) porcupine.Operation {
	if ret < 0 {
		ret = 1 << 62
	}
	return porcupine.Operation{ClientId: client, Input: Input{Kind: kind, Voucher: 1, User: user}, Call: call, Output: out, Return: ret}
}

// TestTheModelTellsASaleFromItsDefects: the model accepts what a correct
// sale may answer, concurrency and unanswered requests included, and
// refuses each defect the outside checks found.
func TestTheModelTellsASaleFromItsDefects(t *testing.T) {
	reserved := func(id int64) Output { return Output{Outcome: Reserved, OrderID: id} }
	held := func(id int64) Output { return Output{Outcome: Held, OrderID: id} }
	stock := func(n int64) Output { return Output{Outcome: Stock, Stock: n} }
	soldOut, noOrder, unknown := Output{Outcome: SoldOut}, Output{Outcome: NoOrder}, Output{Outcome: Unknown}
	for _, c := range []struct {
		name  string
		legal bool
		ops   []porcupine.Operation
	}{
		{"two buyers, one unit each, then sold out", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(1, Buy, 2, 20, 30, reserved(12)), op(2, Buy, 3, 40, 50, soldOut),
			op(0, ReadOrder, 1, 60, 70, held(11)), op(3, ReadStock, 0, 80, 90, stock(0)),
		}},
		{"concurrent buys: either may take the last unit", true, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(1, Buy, 2, 15, 40, soldOut), op(2, Buy, 3, 12, 50, reserved(13)),
		}},
		{"an unanswered buy that reserved, seen by a later read", true, []porcupine.Operation{
			op(0, Buy, 1, 0, -1, unknown), op(1, ReadOrder, 1, 20, 30, held(99)), op(1, Buy, 1, 40, 50, held(99)),
		}},
		{"an unanswered buy that did nothing", true, []porcupine.Operation{
			op(0, Buy, 1, 0, -1, unknown), op(1, ReadOrder, 1, 20, 30, noOrder), op(1, ReadStock, 0, 40, 50, stock(2)),
		}},
		{"oversold: three units of two", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(1, Buy, 2, 0, 10, reserved(12)), op(2, Buy, 3, 0, 10, reserved(13)),
		}},
		{"a buyer sold twice", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(0, Buy, 1, 20, 30, reserved(12)),
		}},
		{"order_not_found for an order answered 200", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(0, ReadOrder, 1, 20, 30, noOrder),
		}},
		{"already_purchased with another order", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(0, Buy, 1, 20, 30, held(12)),
		}},
		{"sold out with stock left", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(1, Buy, 2, 20, 30, soldOut),
		}},
		{"a stale stock read", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, reserved(11)), op(1, ReadStock, 0, 20, 30, stock(2)),
		}},
		{"an answer the contract never gives", false, []porcupine.Operation{
			op(0, Buy, 1, 0, 10, Output{Outcome: Wrong, Status: 403}),
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

// TestTheBucketModelAllowsOnlyAnEarlySoldOut: a sold out answered while a
// unit remained is legal for a voucher in buckets and for no other; an
// oversell, or a stock read that is wrong, is illegal for both.
func TestTheBucketModelAllowsOnlyAnEarlySoldOut(t *testing.T) {
	reserved := func(id int64) Output { return Output{Outcome: Reserved, OrderID: id} }
	stock := func(n int64) Output { return Output{Outcome: Stock, Stock: n} }
	soldOut := Output{Outcome: SoldOut}
	early := []porcupine.Operation{op(0, Buy, 1, 0, 10, reserved(11)), op(1, Buy, 2, 20, 30, soldOut), op(2, Buy, 3, 40, 50, reserved(13))}
	oversold := []porcupine.Operation{op(0, Buy, 1, 0, 10, reserved(11)), op(1, Buy, 2, 20, 30, reserved(12)), op(2, Buy, 3, 40, 50, reserved(13))}
	wrongRead := []porcupine.Operation{op(0, Buy, 1, 0, 10, reserved(11)), op(1, ReadStock, 2, 20, 30, stock(0))}
	for _, c := range []struct {
		name          string
		ops           []porcupine.Operation
		whole, bucket bool
	}{
		{"sold out with a unit left, sold after", early, false, true},
		{"three units of two", oversold, false, false},
		{"a stock read of 0 with a unit left", wrongRead, false, false},
	} {
		if err := CheckModel(Model(2), c.ops, 5*time.Second); (err == nil) != c.whole {
			t.Errorf("%s, whole voucher: legal=%v, want %v (%v)", c.name, err == nil, c.whole, err)
		}
		if err := CheckModel(BucketModel(2), c.ops, 5*time.Second); (err == nil) != c.bucket {
			t.Errorf("%s, in buckets: legal=%v, want %v (%v)", c.name, err == nil, c.bucket, err)
		}
	}
}

// TestReadsThatSawNothingAreLeftOutOfTheCheck: unanswered and refused reads
// are dropped before the search (they change and constrain nothing), so a
// history thick with them is decided at once, with the verdict it has
// without them; an unanswered buy stays in (it may have reserved).
func TestReadsThatSawNothingAreLeftOutOfTheCheck(t *testing.T) {
	reserved := func(id int64) Output { return Output{Outcome: Reserved, OrderID: id} }
	unknown, refused := Output{Outcome: Unknown}, Output{Outcome: Refused}
	var blind []porcupine.Operation
	for c := range 40 { // each pending to the end: 2^40 placements for a search that keeps them
		kind := ReadStock
		if c%2 == 1 {
			kind = ReadOrder
		}
		out := unknown
		if c%5 == 0 {
			out = refused
		}
		blind = append(blind, op(10+c, kind, int64(c%3+1), int64(c), -1, out))
	}
	unansweredBuy := op(9, Buy, 3, 0, -1, unknown)
	if got := withoutBlindReads(append(slices.Clone(blind), unansweredBuy)); len(got) != 1 || got[0].Input.(Input).Kind != Buy {
		t.Fatalf("kept %d operations, want only the unanswered buy", len(got))
	}
	legal := append([]porcupine.Operation{op(0, Buy, 1, 0, 10, reserved(11)), op(1, Buy, 2, 20, 30, reserved(12))}, blind...)
	if err := CheckModel(Model(2), legal, 10*time.Second); err != nil {
		t.Fatalf("a legal sale among blind reads: %v", err)
	}
	oversold := append([]porcupine.Operation{op(0, Buy, 1, 0, 10, reserved(11)), op(1, Buy, 2, 20, 30, reserved(12)),
		op(2, Buy, 3, 40, 50, reserved(13))}, blind...)
	if err := CheckModel(Model(2), oversold, 10*time.Second); err == nil || !strings.Contains(err.Error(), "not linearizable") {
		t.Fatalf("an oversold sale among blind reads: %v, want not linearizable", err)
	}
}
