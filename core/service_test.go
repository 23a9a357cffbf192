package core_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// recorder notes the order services start and stop in.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) note(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) service(name string) *core.RunService {
	return core.NewService(name, func(ctx context.Context) error {
		r.note("start " + name)
		<-ctx.Done()
		r.note("stop " + name)
		return nil
	})
}

func TestServicesStopInTheReverseOrderOfTheirStart(t *testing.T) {
	r := &recorder{}
	ss := core.Services{r.service("watchers"), r.service("pipeline"), r.service("http")}
	if err := ss.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // each has begun to run
	if err := ss.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	stops := slices.DeleteFunc(slices.Clone(r.events), func(e string) bool { return e[:5] == "start" })
	if want := []string{"stop http", "stop pipeline", "stop watchers"}; !slices.Equal(stops, want) {
		t.Fatalf("stopped in the order %v, want %v", stops, want)
	}
	for _, s := range ss {
		select {
		case <-s.Done():
		default:
			t.Fatalf("%s is not done after Stop", s.Name())
		}
		if s.Err() != nil {
			t.Fatalf("%s: Err %v after a Stop, want nil", s.Name(), s.Err())
		}
	}
}

func TestAServiceThatStopsOnItsOwnIsReported(t *testing.T) {
	boom := errors.New("listener closed")
	failing := core.NewService("http", func(ctx context.Context) error { return boom })
	ss := core.Services{(&recorder{}).service("pipeline"), failing}
	if err := ss.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ss.Failed():
		if !errors.Is(err, boom) {
			t.Fatalf("Failed gave %v, want the listener's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a service that stopped on its own was not reported")
	}
	if err := ss.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestAStopThatOutlastsItsBudgetSaysSo(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	slow := core.NewService("pipeline", func(ctx context.Context) error {
		<-ctx.Done()
		<-release // a batch still being stored
		return nil
	})
	if err := slow.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := slow.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop past its budget = %v, want DeadlineExceeded", err)
	}
}

func TestServicesThatFailToStartStopTheOnesBefore(t *testing.T) {
	r := &recorder{}
	first := r.service("watchers")
	started := first
	ss := core.Services{first, started} // the same service twice cannot start twice
	if err := ss.Start(context.Background()); err == nil {
		t.Fatal("a service started twice")
	}
	select {
	case <-first.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the service started before the failure was not stopped")
	}
}

func TestDutiesServiceRunsItsDutiesUntilStopped(t *testing.T) {
	var mu sync.Mutex
	runs := 0
	s := core.DutiesService("watchers", []core.Duty{{Name: "tick", Every: 5 * time.Millisecond, Do: func(context.Context) error {
		mu.Lock()
		runs++
		mu.Unlock()
		return nil
	}}}, nil)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := runs
	mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n < 3 || runs != n {
		t.Fatalf("the duty ran %d times in 60ms and %d after Stop; want several, then none", n, runs-n)
	}
}
