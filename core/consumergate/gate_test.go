package consumergate_test

import (
	"testing"

	"github.com/seckill-lab/seckill/core/consumergate"
)

// TestConsumersStartedDuringAPauseTakeNothing: the setting is read before
// the pipeline's consumers start, so a new instance's first fetch already
// waits for the resume; the pause is not acked before they are parked.
func TestConsumersStartedDuringAPauseTakeNothing(t *testing.T) {
	board := consumergate.NewLocal()
	paused := board.Set(true, 0)
	g := consumergate.New(consumergate.Config{Board: board, Truth: board, Instance: "new"})
	if g.Paused() {
		t.Fatal("a gate never read says paused")
	}
	g.Runs(2)
	if !g.Paused() {
		t.Fatal("the pipeline's consumers would start open while the operator holds them paused")
	}
	if board.Acked("new") == paused.Version {
		t.Fatal("a pause acked with none of the two consumers parked")
	}
	board.Set(false, 30)
	g.Runs(2)
	if g.Paused() || g.Batch(500) != 3 {
		t.Fatalf("after the resume with a cap of 30: paused %v, batch %d (want 3: a tenth of a second's worth)", g.Paused(), g.Batch(500))
	}
}
