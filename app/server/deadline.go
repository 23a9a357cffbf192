package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// requestContextKey's value is true on a request's context and on every
// context derived from it: what a request does is told from what a duty
// does (a statement hook counting the database's cost of requests, say).
type requestContextKey struct{}

// requestDeadline is a request's context with its deadline, whose timer
// is armed only when something waits on it. context.WithDeadline arms a
// runtime timer for every request and stops it at the end; most of a
// sale's requests are answered from memory (its sold-out phase) and never
// wait on anything, and arming and stopping the timer was about 6 % of such
// a request's CPU (docs/performance.md). Whatever waits on a context asks
// for Done first (a select, the standard library's propagation to a
// derived context), and Done arms the standard library's own
// context.WithDeadline, which from then on answers everything; before that
// Err reads the clock, and Deadline is known without a timer (go-redis and
// database/sql set their connections' deadlines from it).
type requestDeadline struct {
	parent   context.Context
	deadline time.Time
	once     sync.Once
	state    atomic.Pointer[armedDeadline] // set once, by arm or cancel
}

// armedDeadline is the context a requestDeadline became: ctx is nil when
// it was cancelled before anything waited on it.
type armedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// closedDone is the Done of a requestDeadline cancelled before it armed.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// cancelledUnarmed is the state of a requestDeadline cancelled before
// anything waited on it.
var cancelledUnarmed = &armedDeadline{}

// newRequestDeadline is context.WithDeadline(parent, deadline) with the
// timer armed on the first Done. Its cancel must be called when the
// request ends, as context.WithDeadline's cancel function.
func newRequestDeadline(parent context.Context, deadline time.Time) *requestDeadline {
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return &requestDeadline{parent: parent, deadline: deadline}
}

func (r *requestDeadline) arm() *armedDeadline {
	r.once.Do(func() {
		ctx, cancel := context.WithDeadline(r.parent, r.deadline)
		r.state.Store(&armedDeadline{ctx: ctx, cancel: cancel})
	})
	return r.state.Load()
}

func (r *requestDeadline) cancel() {
	// Cancelled before anything waited: no timer is ever armed, and a
	// late Done finds the context over, as a cancelled one is.
	r.once.Do(func() { r.state.Store(cancelledUnarmed) })
	if a := r.state.Load(); a.cancel != nil {
		a.cancel()
	}
}

func (r *requestDeadline) Deadline() (time.Time, bool) { return r.deadline, true }

func (r *requestDeadline) Done() <-chan struct{} {
	if a := r.arm(); a.ctx != nil {
		return a.ctx.Done()
	}
	return closedDone
}

func (r *requestDeadline) Err() error {
	if a := r.state.Load(); a != nil {
		if a.ctx == nil {
			return context.Canceled
		}
		return a.ctx.Err()
	}
	if err := r.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(r.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value is the armed context's once armed: the standard library finds its
// own cancelable context through it, and attaches a derived context to it
// instead of starting a goroutine to watch Done.
func (r *requestDeadline) Value(key any) any {
	if key == (requestContextKey{}) {
		return true
	}
	if a := r.state.Load(); a != nil && a.ctx != nil {
		return a.ctx.Value(key)
	}
	return r.parent.Value(key)
}
