package natsqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/internal/brokerevent"
	"github.com/seckill-lab/seckill/adapters/natsqueue"
	"github.com/seckill-lab/seckill/adapters/redisreserve/saletest"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

// TestConformance runs the suite through the real path: the reservation
// script writes the outbox, the relay forwards to JetStream, the
// consumers pull from JetStream. On the real NATS server
// (SECKILL_TEST_NATS_URL; required in CI) or, without it, on an embedded
// one.
func TestConformance(t *testing.T) {
	url := testenv.BrokerURL(t, testenv.NATSURLEnv)
	if url == "" {
		embedded, stop, err := natsqueue.StartEmbedded()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		url = embedded
	}
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		const ackWait = time.Second
		open := func(t *testing.T, ns, durable string) core.Queue {
			broker, err := natsqueue.New(context.Background(), natsqueue.Config{URL: url,
				Stream: brokerevent.Name(r.Prefix+ns+":", "orders"), Durable: durable, AckWait: ackWait,
				Block: 100 * time.Millisecond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cfg := broker.Config()
				natsqueue.RemoveStreams(context.Background(), url, func(name string) bool { return name == cfg.Stream || name == cfg.DeadStream })
			})
			return saletest.Run(saletest.Relayed(t, r, ns, broker, 300*time.Millisecond))
		}
		queuetest.Run(t, queuetest.Backend{
			Open:   func(t *testing.T, ns string) core.Queue { return open(t, ns, "") },
			Replay: func(t *testing.T, ns string) core.Queue { return open(t, ns, "replay-"+testenv.RandomSuffix()) },
			Sell:   saletest.Sell(r),
			// A kill stops the relays and drops the connection: what the
			// consumers held comes back after AckWait.
			Crash: func(_ *testing.T, q core.Queue) {
				q.(*saletest.Running).Halt()
				q.Close()
			},
			Shared:         true,
			RedeliveryWait: ackWait,
		})
	})
}
