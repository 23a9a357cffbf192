package pubsubqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/pubsubqueue"
	"github.com/seckill-lab/seckill/adapters/redisreserve/saletest"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

func TestConformance(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		queuetest.Run(t, queuetest.Backend{
			Open: func(t *testing.T, ns string) core.Queue {
				q, err := pubsubqueue.New(context.Background(), r.Client,
					pubsubqueue.Config{Channel: saletest.QueueKey(r, ns), Block: 100 * time.Millisecond}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return q
			},
			Sell: saletest.Sell(r),
			// SIGKILL: the subscription is gone with its connection.
			Crash:  func(_ *testing.T, q core.Queue) { q.Close() },
			Shared: true,
		})
	})
}
