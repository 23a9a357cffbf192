package chanbatch

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestReceive(t *testing.T) {
	ctx := context.Background()
	open := make(chan struct{})
	ch := make(chan int, 10)
	for i := range 5 {
		ch <- i
	}
	if got, err := Receive(ctx, ch, open, open, time.Second, 3); err != nil || len(got) != 3 || got[0] != 0 {
		t.Fatalf("a batch of 3 of 5 ready: %v %v", got, err)
	}
	if got, err := Receive(ctx, ch, open, open, time.Second, 10); err != nil || len(got) != 2 {
		t.Fatalf("the 2 left: %v %v", got, err)
	}
	start := time.Now()
	if got, err := Receive(ctx, ch, open, open, 30*time.Millisecond, 10); err != nil || got != nil || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("empty: %v %v after %v", got, err, time.Since(start))
	}
	closed := make(chan struct{})
	close(closed)
	ch <- 9
	if _, err := Receive(ctx, ch, open, closed, time.Second, 10); !errors.Is(err, ErrStopped) {
		t.Fatalf("closed consumer with a value ready: %v, want ErrStopped", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	empty := make(chan int)
	if _, err := Receive(cctx, empty, open, open, time.Second, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	close(empty)
	if _, err := Receive(ctx, empty, open, open, time.Second, 10); !errors.Is(err, ErrStopped) {
		t.Fatalf("closed channel: %v", err)
	}
}
