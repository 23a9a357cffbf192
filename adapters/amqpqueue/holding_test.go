package amqpqueue

import (
	"strings"
	"testing"
)

// TestHoldingJudgesARollCall: the queue is called empty only when nothing
// is ready, each process answered both roll calls alike holding nothing,
// and their consumers are all the queue's.
func TestHoldingJudgesARollCall(t *testing.T) {
	quiet := func() map[string]rollCallReport {
		return map[string]rollCallReport{
			"a": {Process: "a", Consumers: map[string]int64{"a-0": 0, "a-1": 0}, Moves: 40},
			"b": {Process: "b", Consumers: map[string]int64{}, Moves: 7},
		}
	}
	cases := []struct {
		name      string
		change    func(before, after map[string]rollCallReport)
		ready     int
		consumers int
		want      string
	}{
		{name: "drained", consumers: 2, want: ""},
		{name: "ready", ready: 1, consumers: 2, want: "1 orders queued"},
		{name: "held", consumers: 2, want: "holds 4 orders unacked",
			change: func(b, a map[string]rollCallReport) { a["a"].Consumers["a-1"] = 4; b["a"].Consumers["a-1"] = 4 }},
		{name: "moved between the answers", consumers: 2, want: "during the roll call",
			change: func(b, a map[string]rollCallReport) { r := a["b"]; r.Moves++; a["b"] = r }},
		{name: "a consumer replaced", consumers: 2, want: "consumers changed",
			change: func(b, a map[string]rollCallReport) { delete(a["a"].Consumers, "a-1"); a["a"].Consumers["a-2"] = 0 }},
		{name: "forwarding", consumers: 2, want: "is forwarding",
			change: func(b, a map[string]rollCallReport) { r := a["b"]; r.Forwarding = 1; a["b"] = r }},
		{name: "a relay holding an unconfirmed batch", consumers: 2, want: "did not confirm",
			change: func(b, a map[string]rollCallReport) { r := a["b"]; r.Failing = true; a["b"] = r }},
		{name: "a process that answered late", consumers: 2, want: "second roll call only",
			change: func(b, a map[string]rollCallReport) { delete(b, "b") }},
		{name: "a process gone", consumers: 2, want: "gone since the first: a",
			change: func(b, a map[string]rollCallReport) { delete(a, "a") }},
		{name: "a consumer nobody answers for", consumers: 3, want: "3 consumers and 2 answered"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, after := quiet(), quiet()
			if c.change != nil {
				c.change(before, after)
			}
			got := holding(before, after, c.ready, c.consumers)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("holding = %q, want %q", got, c.want)
			}
		})
	}
}
