package kafkaqueue_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seckill-lab/seckill/adapters/internal/brokerevent"
	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/redisreserve/saletest"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/queuetest"
)

// brokers are the Kafka brokers of the test: SECKILL_TEST_KAFKA_BROKERS,
// or an in-process kfake cluster. This machine kind runs no Kafka, so in
// CI too the suite runs on kfake, a stand-in: it speaks the protocol
// (groups, offsets, idempotent producers) without Kafka's storage or
// replication.
func brokers(t *testing.T) []string {
	if v := os.Getenv(testenv.KafkaBrokersEnv); v != "" {
		return strings.Split(v, ",")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// TestConformance runs the suite through the real path: the reservation
// script writes the outbox, the relay produces to Kafka (kfake unless
// SECKILL_TEST_KAFKA_BROKERS names a real one), the consumers are members
// of the group and commit after the ack.
func TestConformance(t *testing.T) {
	seeds := brokers(t)
	testenv.ForEachRedisAndCluster(t, func(t *testing.T, r testenv.Redis) {
		open := func(t *testing.T, ns, group string) core.Queue {
			broker, err := kafkaqueue.New(context.Background(), kafkaqueue.Config{Brokers: seeds,
				Topic: brokerevent.Name(r.Prefix+ns+":", "orders"), Group: group, Partitions: 4,
				SessionTimeout: 6 * time.Second, Block: 200 * time.Millisecond}, testenv.Log(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { removeTopics(seeds, broker.Config()) })
			// A relay's entries are claimed by another after a second
			// idle: with 300 ms, a produce to kfake slower than that on a
			// loaded machine had its entries forwarded again by the other
			// process's relay, a message delivered twice.
			return saletest.Run(saletest.Relayed(t, r, ns, broker, time.Second))
		}
		queuetest.Run(t, queuetest.Backend{
			// A group per namespace: groups are the cluster's, and a member
			// an earlier subtest left (killed, its session not yet expired)
			// would rebalance this one's group, revoking partitions between
			// a Fetch and its Ack.
			Open: func(t *testing.T, ns string) core.Queue {
				return open(t, ns, brokerevent.Name(r.Prefix+ns+":", "persisters"))
			},
			Replay: func(t *testing.T, ns string) core.Queue { return open(t, ns, "replay-"+testenv.RandomSuffix()) },
			Sell:   saletest.Sell(r),
			// A kill stops the relays and the members: their partitions
			// go to the survivors from the committed offsets.
			Crash: func(_ *testing.T, q core.Queue) {
				q.(*saletest.Running).Halt()
				q.Close()
			},
			Shared:         true,
			ByVoucher:      true,
			JoinWait:       3 * time.Second,
			RedeliveryWait: 3 * time.Second,
		})
	})
}

// removeTopics deletes a test's topics.
func removeTopics(seeds []string, cfg kafkaqueue.Config) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kadm.NewClient(cl).DeleteTopics(ctx, cfg.Topic, cfg.DeadTopic)
}
