package server

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill-lab/seckill/adapters/natsqueue"
)

// removeBrokerState deletes what a test's server made on a real broker
// (its streams, named from the test's key prefix), so the machine's
// broker does not fill up with tests' orders.
func removeBrokerState(t testing.TB, cfg Config) {
	if cfg.Queue != natsqueue.Name || cfg.EmbeddedRedis() {
		return
	}
	url := cfg.NATSURL
	if url == "" {
		url = natsqueue.DefaultURL
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Logf("remove the test's NATS streams: %v", err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream := natsqueue.StreamName(cfg.KeyPrefix)
	for _, name := range []string{stream, stream + "_dead"} {
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Logf("remove NATS stream %s: %v", name, err)
		}
	}
}
