package streamgroup_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/redisreserve/saletest"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

func TestConformance(t *testing.T) {
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		const claimAfter = 300 * time.Millisecond
		open := func(t *testing.T, ns, group, process string) core.Queue {
			q, err := streamgroup.New(context.Background(), r.Client, streamgroup.Config{
				Stream: saletest.QueueKey(r, ns), Group: group, ConsumerPrefix: process, ClaimMinIdle: claimAfter,
				ClaimInterval: 50 * time.Millisecond, Block: 100 * time.Millisecond,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return q
		}
		queuetest.Run(t, queuetest.Backend{
			Open:   func(t *testing.T, ns string) core.Queue { return open(t, ns, "", "") },
			OpenAs: func(t *testing.T, ns, process string) core.Queue { return open(t, ns, "", process) },
			Replay: func(t *testing.T, ns string) core.Queue { return open(t, ns, "replay-"+testenv.RandomSuffix(), "") },
			Sell:   saletest.Sell(r),
			// The process state is the consumers' names and cursors:
			// abandoning them is what a SIGKILL leaves behind.
			Crash:          func(*testing.T, core.Queue) {},
			Shared:         true,
			RedeliveryWait: claimAfter,
		})
	})
}
