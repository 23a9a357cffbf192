package amqpqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/adapters/internal/brokerevent"
	"github.com/seckill-lab/seckill/adapters/redisreserve/saletest"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

// TestConformance runs the suite through the real path: the reservation
// script writes the outbox, the relay publishes to RabbitMQ with
// confirms, the consumers take deliveries from the quorum queue. On the
// real RabbitMQ (SECKILL_TEST_AMQP_URL; required in CI): there is no
// stand-in to embed.
func TestConformance(t *testing.T) {
	url := testenv.BrokerURL(t, testenv.AMQPURLEnv)
	if url == "" {
		t.Skipf("%s is not set: RabbitMQ not tested (CI sets it)", testenv.AMQPURLEnv)
	}
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		queuetest.Run(t, queuetest.Backend{
			Open: func(t *testing.T, ns string) core.Queue {
				broker, err := amqpqueue.New(context.Background(), amqpqueue.Config{URL: url,
					Queue: brokerevent.Name(r.Prefix+ns+":", "orders"), Block: 100 * time.Millisecond}, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { amqpqueue.Remove(url, broker.Config().Queue) })
				return saletest.Run(saletest.Relayed(t, r, ns, broker, 300*time.Millisecond))
			},
			Sell: saletest.Sell(r),
			// A kill stops the relays and drops the connection: RabbitMQ
			// gives what the consumers held to the next consumer at once.
			Crash: func(_ *testing.T, q core.Queue) {
				q.(*saletest.Running).Halt()
				q.Close()
			},
			Shared: true,
		})
	})
}
