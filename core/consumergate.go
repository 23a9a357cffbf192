package core

import "context"

// ConsumerSetting is how an operator has the consumers of every instance
// run: paused (none takes an order from the queue; reservations go on and
// are queued), or persisting at most PerSecond orders a second in all (0:
// no cap). Version counts the changes, so an instance can say which one it
// runs.
type ConsumerSetting struct {
	Paused    bool
	PerSecond int
	Version   int64
}

// ConsumerGate is what a pipeline's consumers ask before they take orders
// from the queue: whether to, how many at once, and when they may persist
// what they took. An operator's pause or cap reaches them through it.
type ConsumerGate interface {
	// Runs tells the gate how many consumers the pipeline starts: a pause
	// holds once that many are parked.
	Runs(consumers int)
	// Paused reports whether the consumers are to stop taking orders.
	Paused() bool
	// Hold parks the calling consumer while the consumers are paused, its
	// batches in flight finished, and returns once they are resumed or
	// ctx ends.
	Hold(ctx context.Context)
	// Batch is the most orders one fetch may take now, at most want (a
	// cap fetches a tenth of a second's worth at a time).
	Batch(want int) int
	// Charge waits until n orders taken may be persisted under the cap
	// (or ctx ends: what was taken is persisted then all the same, since
	// some queues lose what they handed out).
	Charge(ctx context.Context, n int)
}

// OpenGate is the gate of consumers nobody steers: never paused, no cap.
type OpenGate struct{}

func (OpenGate) Runs(int)                    {}
func (OpenGate) Paused() bool                { return false }
func (OpenGate) Hold(context.Context)        {}
func (OpenGate) Batch(want int) int          { return want }
func (OpenGate) Charge(context.Context, int) {}
