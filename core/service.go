package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Service is a part of a process that runs in the background between its
// Start and its Stop: the HTTP server, the order pipeline, the watchers of
// Redis, a pub/sub listener. A process lists its services in Services,
// which starts them in order and stops them in the reverse order — the way
// River's startstop services and asynq's ordered shutdown do — so what
// takes work in (the HTTP server) stops before what finishes it (the
// pipeline), and nothing runs on after Stop.
type Service interface {
	// Name says what the service is, for logs.
	Name() string
	// Start starts the service and returns; it then runs until Stop. ctx
	// bounds the start only, not the service's life. An error means it did
	// not start.
	Start(ctx context.Context) error
	// Stop stops the service and returns once it has stopped, or when ctx
	// ends (then with ctx's error, the service abandoned mid-stop).
	Stop(ctx context.Context) error
	// Done is closed once the service has stopped, on its own or by Stop;
	// Err then says why it stopped on its own (nil after Stop).
	Done() <-chan struct{}
	Err() error
}

// RunService is a Service made of one function that runs until its
// context ends. Most services are one: a loop, a listener, a pool.
type RunService struct {
	name string
	run  func(ctx context.Context) error

	mu       sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{}
	doneOnce sync.Once
	err      error
	stopped  bool
}

// NewService makes a Service of run, which must return soon after its
// context ends; an error it returns before that is the service failing.
func NewService(name string, run func(ctx context.Context) error) *RunService {
	return &RunService{name: name, run: run, done: make(chan struct{})}
}

// DutiesService is a Service that runs duties, each on its own ticker (as
// RunDuties does), from Start to Stop.
func DutiesService(name string, duties []Duty, onError func(Duty, error)) *RunService {
	return NewService(name, func(ctx context.Context) error {
		RunDuties(ctx, duties, onError)
		return nil
	})
}

func (s *RunService) Name() string { return s.name }

// Start runs the function on a goroutine of its own, on a context that
// only Stop ends.
func (s *RunService) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return fmt.Errorf("service %s: started twice", s.name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		err := s.run(ctx)
		s.mu.Lock()
		if !s.stopped {
			s.err = err
			if err == nil {
				s.err = fmt.Errorf("service %s stopped on its own", s.name)
			}
		}
		s.mu.Unlock()
		s.doneOnce.Do(func() { close(s.done) })
	}()
	return nil
}

// Stop ends the function's context and waits for it to return.
func (s *RunService) Stop(ctx context.Context) error {
	s.mu.Lock()
	cancel := s.cancel
	s.stopped = true
	s.mu.Unlock()
	if cancel == nil { // never started: nothing runs, and Done says so
		s.doneOnce.Do(func() { close(s.done) })
		return nil
	}
	cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("service %s did not stop in time: %w", s.name, ctx.Err())
	}
}

func (s *RunService) Done() <-chan struct{} { return s.done }

func (s *RunService) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Services are a process's services, in the order they start; they stop
// in the reverse order.
type Services []Service

// Start starts each service in order. If one fails to start, the ones
// already started are stopped (in reverse) and its error returned.
func (ss Services) Start(ctx context.Context) error {
	for i, s := range ss {
		if err := s.Start(ctx); err != nil {
			_ = ss[:i].Stop(context.WithoutCancel(ctx))
			return fmt.Errorf("start %s: %w", s.Name(), err)
		}
	}
	return nil
}

// Stop stops the services in the reverse order of their start, each
// within what is left of ctx, and returns every error.
func (ss Services) Stop(ctx context.Context) error {
	var errs []error
	for _, s := range slices.Backward(ss) {
		if err := s.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Failed returns a channel that yields the error of the first service to
// stop on its own (a listener that died, say). It yields nothing once the
// services are stopped by Stop.
func (ss Services) Failed() <-chan error {
	out := make(chan error, len(ss))
	for _, s := range ss {
		go func() {
			<-s.Done()
			if err := s.Err(); err != nil {
				out <- fmt.Errorf("%s: %w", s.Name(), err)
			}
		}()
	}
	return out
}
