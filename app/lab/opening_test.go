package lab

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestTheStepPacerSendsEachArrivalWhenDue: arrivals at each step's rate,
// hit k due when the steps' arrivals reach k, and none past the end.
func TestTheStepPacerSendsEachArrivalWhenDue(t *testing.T) {
	p := stepPacer{rates: []float64{2, 4}, step: time.Second}
	if p.total() != 6 {
		t.Fatalf("total %d, want 6", p.total())
	}
	for k, want := range []time.Duration{0, 500 * time.Millisecond, time.Second, 1250 * time.Millisecond, 1500 * time.Millisecond, 1750 * time.Millisecond} {
		if got, ok := p.due(uint64(k)); !ok || got != want {
			t.Fatalf("hit %d due at %v (%t), want %v", k, got, ok, want)
		}
	}
	if _, ok := p.due(6); ok {
		t.Fatal("a seventh hit is due; the schedule makes six")
	}
	if wait, stop := p.Pace(300*time.Millisecond, 1); stop || wait != 200*time.Millisecond {
		t.Fatalf("at 300 ms after one hit: wait %v (stop %t), want 200 ms", wait, stop)
	}
	if wait, stop := p.Pace(900*time.Millisecond, 1); stop || wait != 0 {
		t.Fatalf("late for the second hit: wait %v (stop %t), want none", wait, stop)
	}
	if _, stop := p.Pace(2*time.Second, 6); !stop {
		t.Fatal("the schedule does not stop after its last hit")
	}
}

// TestAnOpeningSendsWhateverTheAnswersAndCountsFromTheDueTime: a server
// that holds every answer of its first half second (a cold start) and
// then answers in 50 ms still gets each arrival when due (open-loop: 40
// a second is 40 a second, not the few a waiting client would send), and
// the latency of the first second counts the hold from the moment each
// arrival was due: what a shopper waited, not what the wire took.
func TestAnOpeningSendsWhateverTheAnswersAndCountsFromTheDueTime(t *testing.T) {
	var start atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start.CompareAndSwap(0, time.Now().UnixNano())
		if hold := time.Until(time.Unix(0, start.Load()).Add(500 * time.Millisecond)); hold > 0 {
			time.Sleep(hold)
		}
		time.Sleep(50 * time.Millisecond)
		w.Write([]byte(`{"orderId":"1"}`))
	}))
	defer srv.Close()
	pacer := stepPacer{rates: []float64{40, 40}, step: time.Second}
	signed := make([]string, pacer.total())
	for i := range signed {
		signed[i] = "Bearer x"
	}
	hits := attackOpening(srv.URL, 1, signed, pacer, 5*time.Second)
	rows := openingRows("test", 40, pacer, []float64{1, 1}, hits)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want one per one-second step", len(rows))
	}
	first, second := rows[0], rows[1]
	if first.Offered != 40 || second.Offered != 40 || first.Goodput != 40 || second.Goodput != 40 {
		t.Fatalf("offered %v then %v, answered 200 %v then %v a second; want 40 each", first.Offered, second.Offered, first.Goodput, second.Goodput)
	}
	ok := first.Kinds["200"]
	if ok.at(1) < 500*time.Millisecond || ok.at(1) > 2*time.Second || ok.at(0.5) < 50*time.Millisecond {
		t.Fatalf("the first second's answers took %v (p50) to %v (max) from when due; want the first held about 550 ms", ok.at(0.5), ok.at(1))
	}
	if late := second.Kinds["200"].at(0.99); late > 400*time.Millisecond {
		t.Fatalf("the second second's p99 is %v; want about 50 ms once the hold is over", late)
	}
}
