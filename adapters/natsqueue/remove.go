package natsqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RemoveStreams deletes every stream on the server at url whose name
// matches: what a test, or the lab, made there, so a shared NATS does not
// fill up with their orders. A stream deleted meanwhile is no error.
func RemoveStreams(ctx context.Context, url string, match func(name string) bool) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return fmt.Errorf("nats: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("nats: jetstream: %w", err)
	}
	names := js.StreamNames(ctx)
	var doomed []string
	for name := range names.Name() {
		if match(name) {
			doomed = append(doomed, name)
		}
	}
	errs := []error{names.Err()}
	for _, name := range doomed {
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, fmt.Errorf("nats: delete stream %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Streams is the names of the streams of a deployment whose keys start
// with keyPrefix: the orders and their dead letters.
func Streams(keyPrefix string) []string {
	stream := StreamName(keyPrefix)
	return []string{stream, stream + "_dead"}
}
