package redisreserve_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// stockOp is one call against a voucher's count: a reservation (reserved
// or not), a return of a buyer's unit (returned or not), or a stock read.
type stockOp struct {
	kind string // "reserve", "return", "read"
	ok   bool
	read int64
}

// stockModel is the voucher's count as a shopper sees it: a reservation
// takes one unit, a return gives one back, a read answers the count. (A
// refused reservation is not checked here: the sale's history check is.)
func stockModel(units int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return units },
		Step: func(state, input, _ any) (bool, any) {
			n, op := state.(int64), input.(stockOp)
			switch {
			case op.kind == "reserve" && op.ok:
				return n > 0, n - 1
			case op.kind == "return" && op.ok:
				return true, n + 1
			case op.kind == "read":
				return op.read == n, n
			}
			return true, n
		},
	}
}

// TestAStockReadAnswersACountTheVoucherHad: shoppers all routed to one
// bucket of three (so every unit of the other two is lent to it, over and
// over), some of them giving their unit back at once, then other buyers
// giving theirs back with nobody buying, while readers ask for the stock
// without pause: every read answers a count the voucher had at some
// moment of the read, and none is told busy once nobody buys. On a cluster the buckets lie on three
// masters; a sum of parts each read at its own moment counted a unit in
// flight twice, or a returned one in a state that never was.
func TestAStockReadAnswersACountTheVoucherHad(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		s := newBucketSale(t, r, 0)
		const units = 60
		v := s.load(t, 77, units, 3)
		shoppers := shoppersOf(120, 1, 3)
		base := time.Now()
		var (
			mu   sync.Mutex
			ops  []porcupine.Operation
			done atomic.Bool
			wg   sync.WaitGroup
		)
		record := func(client int, call time.Time, op stockOp) {
			ret := time.Since(base).Nanoseconds()
			mu.Lock()
			ops = append(ops, porcupine.Operation{ClientId: client, Input: op, Call: call.Sub(base).Nanoseconds(), Return: ret})
			mu.Unlock()
		}
		work := make(chan int64)
		var (
			shopping sync.WaitGroup
			keptMu   sync.Mutex
			kept     []core.Order // reserved and not given back
		)
		for c := range 6 {
			shopping.Go(func() {
				for u := range work {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					o := core.Order{ID: 3_000_000 + u, UserID: u, VoucherID: v.ID, CreatedAt: time.Now()}
					call := time.Now()
					res, err := s.res.Reserve(ctx, o)
					if err != nil {
						t.Errorf("shopper %d: %v", u, err)
						cancel()
						return
					}
					record(c, call, stockOp{kind: "reserve", ok: res.Result == core.Reserved})
					if res.Result == core.Reserved && u%3 == 0 {
						call = time.Now()
						got, err := s.res.Live().ReturnUnit(ctx, o)
						if err != nil {
							t.Errorf("return of shopper %d's unit: %v", u, err)
						}
						record(c, call, stockOp{kind: "return", ok: got == core.UnitReturned})
					} else if res.Result == core.Reserved {
						keptMu.Lock()
						kept = append(kept, o)
						keptMu.Unlock()
					}
					cancel()
				}
			})
		}
		var (
			reads, busy, busyNoneSold atomic.Int64
			noneSold                  atomic.Bool // the sale is over; units only come back
		)
		for c := 6; c < 9; c++ {
			wg.Go(func() {
				for !done.Load() {
					afterSale := noneSold.Load()
					call := time.Now()
					n, err := s.res.RemainingStock(context.Background(), v.ID)
					if core.CodeOf(err) == core.CodeBusy {
						busy.Add(1)
						if afterSale {
							busyNoneSold.Add(1)
						}
						continue // told to retry: no answer to check
					}
					if err != nil {
						t.Errorf("stock: %v", err)
						return
					}
					reads.Add(1)
					record(c, call, stockOp{kind: "read", read: n})
				}
			})
		}
		for _, u := range shoppers {
			work <- u
		}
		close(work)
		shopping.Wait()
		// Then buyers give units back and nobody buys: reads count by
		// the buyers leaving, and none is told busy.
		noneSold.Store(true)
		var giving sync.WaitGroup
		for c := range 3 {
			giving.Go(func() {
				for i := c; i < len(kept); i += 3 {
					call := time.Now()
					got, err := s.res.Live().ReturnUnit(context.Background(), kept[i])
					if err != nil {
						t.Errorf("return of order %d: %v", kept[i].ID, err)
					}
					record(c, call, stockOp{kind: "return", ok: got == core.UnitReturned})
				}
			})
		}
		giving.Wait()
		time.Sleep(20 * time.Millisecond) // a few reads of the voucher at rest
		done.Store(true)
		wg.Wait()
		if n := busyNoneSold.Load(); n > 0 {
			t.Errorf("%d stock reads told busy while units only came back", n)
		}
		if reads.Load() < 20 {
			t.Fatalf("only %d stock reads while the sale ran", reads.Load())
		}
		// Units came back all through the sale: the reads that could not
		// prove none came back meanwhile were told busy, a few (about 1 %
		// of them on the cluster under -race; a bound loose enough for a
		// loaded machine, tight enough to catch reads that cannot settle).
		if busy.Load() > reads.Load()/3 {
			t.Errorf("%d stock reads told busy against %d answered", busy.Load(), reads.Load())
		}
		t.Logf("%d stock reads answered, %d told busy", reads.Load(), busy.Load())
		if porcupine.CheckOperationsTimeout(stockModel(units), ops, time.Minute) != porcupine.Ok {
			t.Fatalf("over %d calls, the stock reads are not counts the voucher had (or the check ran out of time); by call:\n%s",
				len(ops), describeStockOps(ops))
		}
		var left int64 = units
		for _, op := range ops {
			switch in := op.Input.(stockOp); {
			case in.kind == "reserve" && in.ok:
				left--
			case in.kind == "return" && in.ok:
				left++
			}
		}
		if n, err := s.res.RemainingStock(context.Background(), v.ID); err != nil || n != left {
			t.Errorf("after the sale: stock %d, %v; want %d", n, err, left)
		}
	})
}

// describeStockOps lists the calls by when they began.
func describeStockOps(ops []porcupine.Operation) string {
	sorted := slices.SortedFunc(slices.Values(ops), func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var out strings.Builder
	for i, op := range sorted {
		if i == 600 {
			fmt.Fprintf(&out, "… %d more\n", len(sorted)-i)
			break
		}
		in := op.Input.(stockOp)
		what := fmt.Sprintf("%s %v", in.kind, in.ok)
		if in.kind == "read" {
			what = fmt.Sprintf("read %d", in.read)
		}
		fmt.Fprintf(&out, "  [%.3fms, %.3fms] client %d: %s\n", float64(op.Call)/1e6, float64(op.Return)/1e6, op.ClientId, what)
	}
	return out.String()
}
