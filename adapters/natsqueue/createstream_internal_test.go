package natsqueue

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAStreamCreatedWhileTheLastOneIsDeletedIsCreated is the flaky
// conformance run: a test's cleanup deleted the account's last stream, the
// server removed the emptied streams directory in the background, and a
// stream created meanwhile failed ("error creating store for stream",
// err_code 10049). Deleting the only stream while creating others, over
// and over, every creation succeeds. (The window is narrow — between the
// server's removal of the streams directory and of the account's — and
// this does not hit it every run; the failing conformance run's server
// log showed it: "could not create storage directory - mkdir
// …/jetstream/$G/streams: no such file or directory".)
func TestAStreamCreatedWhileTheLastOneIsDeletedIsCreated(t *testing.T) {
	url, stop, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := func(i int) jetstream.StreamConfig {
		name := fmt.Sprintf("race_%d", i)
		return jetstream.StreamConfig{Name: name, Subjects: []string{name + ".*"}, Storage: jetstream.FileStorage}
	}
	if err := createStream(ctx, js, cfg(0)); err != nil {
		t.Fatal(err)
	}
	// Each round: the only stream is deleted while 8 are created; then 7
	// of them are deleted, so one is the last again.
	const each = 8
	last := 0
	for round := 1; round <= 100; round++ {
		var wg sync.WaitGroup
		errs := make([]error, each)
		wg.Go(func() { _ = js.DeleteStream(ctx, cfg(last).Name) })
		for k := range each {
			wg.Go(func() { errs[k] = createStream(ctx, js, cfg(round*each+k)) })
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				t.Fatalf("round %d, stream %d: %v", round, k, err)
			}
		}
		for k := 1; k < each; k++ {
			if err := js.DeleteStream(ctx, cfg(round*each+k).Name); err != nil {
				t.Fatal(err)
			}
		}
		last = round * each
	}
}
