package history

import (
	"math/rand/v2"
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

// TestBoundingUnansweredBuysKeepsEveryVerdict: on random histories of one
// voucher — a correct sale's answers, some left unanswered (whether they
// reserved or not), some corrupted — the checker's verdict with the
// unanswered buys bounded is the verdict without, and the bound shortened
// or dropped some of them (else the test shows nothing).
func TestBoundingUnansweredBuysKeepsEveryVerdict(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 49))
	model := Model(2)
	var legal, illegal, shortened int
	for range 3000 {
		ops, _ := simulatedSale{stock: 2, users: 3, ops: 9, spread: 25, unanswered: 5, wrong: 1}.run(rng)
		bounded := boundUnknownBuys(ops)
		for i, o := range bounded {
			if len(bounded) < len(ops) || o.Return != ops[i].Return {
				shortened++
				break
			}
		}
		want := porcupine.CheckOperations(model, ops)
		if got := porcupine.CheckOperations(model, bounded); got != want {
			t.Fatalf("verdict %v with the unanswered buys bounded, %v without:\n%s", got, want, Describe(ops))
		}
		if want {
			legal++
		} else {
			illegal++
		}
	}
	t.Logf("%d legal, %d illegal, %d shortened", legal, illegal, shortened)
	if legal < 300 || illegal < 300 || shortened < 300 {
		t.Fatalf("%d legal, %d illegal, %d shortened histories: too few of one kind to show the bound keeps verdicts", legal, illegal, shortened)
	}
}

// TestAResolvedOutageIsDecidedAndALostOrderCaught: a sale of 8 units among
// 24 shoppers with an outage early on — 50 buys unanswered, a quarter of
// them reserved all the same — is not decided within a minute whole (each
// unanswered buy may have reserved: every set of their shoppers is a
// state); resolved against the settled buyers it is decided in
// milliseconds, legal, and an order the sale lost (a shopper who reserved
// unanswered and holds no order at the end) is not linearizable.
func TestAResolvedOutageIsDecidedAndALostOrderCaught(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ops, holders := simulatedSale{stock: 8, users: 24, ops: 300, spread: 60, outage: [2]int{10, 160}}.run(rng)
	buyers := Buyers{1: holders}
	if err := CheckModel(BucketModel(8), Resolve(ops, buyers), 5*time.Second); err != nil {
		t.Fatalf("the resolved outage: %v", err)
	}
	if err := CheckModel(Model(8), Resolve(ops, buyers), 5*time.Second); err != nil {
		t.Fatalf("the resolved outage, whole voucher: %v", err)
	}
	// A refusal is a search of every placement: a shorter outage.
	ops, holders = simulatedSale{stock: 8, users: 24, ops: 250, spread: 60, outage: [2]int{10, 70}}.run(rng)
	buyers = Buyers{1: holders}
	lost := -1
	for _, o := range ops {
		if in := o.Input.(Input); in.Kind == Buy && o.Output.(Output).OrderID < 0 {
			lost = int(in.User) // reserved in the outage, unanswered
			break
		}
	}
	if lost < 0 {
		t.Fatal("the outage reserved nothing: nothing to lose")
	}
	delete(holders, int64(lost))
	err := CheckModel(BucketModel(8), Resolve(ops, buyers), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "not linearizable") {
		t.Fatalf("user %d's order lost: %v, want not linearizable", lost, err)
	}
}

// simulatedSale makes a random history of voucher 1, answered as the
// model would at a point inside each operation's interval.
type simulatedSale struct {
	stock      int64
	users, ops int
	spread     int64 // an interval reaches up to this far either side of its point (10 apart)
	unanswered int   // of 20 buys, left unanswered (whether they reserved or not)
	wrong      int   // of 20 answers, corrupted
	outage     [2]int
}

// run answers the sale; in the outage every read is lost and every buy
// unanswered, one in four of them reserving (its OrderID then negative:
// the tests' mark, no answer names it). It returns the buyers at the end.
func (c simulatedSale) run(rng *rand.Rand) ([]porcupine.Operation, map[int64]bool) {
	s := state{stock: c.stock, buyers: map[int64]int64{}}
	var ops []porcupine.Operation
	for i := range c.ops {
		in := Input{Kind: Kind(rng.IntN(3)), Voucher: 1, User: int64(rng.IntN(c.users) + 1)}
		outage := i >= c.outage[0] && i < c.outage[1]
		if outage && in.Kind != Buy {
			continue
		}
		var out Output
		switch id, holds := s.buyers[in.User]; {
		case in.Kind == ReadStock:
			out = Output{Outcome: Stock, Stock: s.stock}
		case holds:
			out = Output{Outcome: Held, OrderID: id}
		case in.Kind == ReadOrder:
			out = Output{Outcome: NoOrder}
		case s.stock > 0 && (!outage || rng.IntN(4) == 0):
			out = Output{Outcome: Reserved, OrderID: int64(100 + i)}
			if outage {
				out.OrderID = -out.OrderID
			}
			s = s.with(in.User, out.OrderID, true)
		default:
			out = Output{Outcome: SoldOut}
		}
		call, ret := int64(i*10)-rng.Int64N(c.spread), int64(i*10)+rng.Int64N(c.spread)+1
		switch r := rng.IntN(20); {
		case outage || (r < c.unanswered && in.Kind == Buy):
			out, ret = Output{Outcome: Unknown, OrderID: out.OrderID}, 1<<62
		case r >= 20-c.wrong:
			out.Stock++
			out.OrderID++
			if out.Outcome == NoOrder {
				out.Outcome = Held
			}
		}
		ops = append(ops, porcupine.Operation{ClientId: i, Input: in, Call: call, Output: out, Return: ret})
	}
	holders := map[int64]bool{}
	for u := range s.buyers {
		holders[u] = true
	}
	return ops, holders
}
