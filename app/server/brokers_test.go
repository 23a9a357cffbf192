package server

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/natsqueue"
	"github.com/seckill-lab/seckill/adapters/testenv"
)

// useTestBrokers points an outside broker's backend at the test's broker:
// RabbitMQ has no stand-in to embed, so without SECKILL_TEST_AMQP_URL its
// runs are skipped (outside CI; under CI they fail).
func useTestBrokers(t testing.TB, cfg *Config) {
	t.Helper()
	if cfg.Queue == kafkaqueue.Name {
		cfg.KafkaBrokers = testKafka(t)
		return
	}
	if cfg.Queue != amqpqueue.Name {
		return
	}
	url := testenv.BrokerURL(t, testenv.AMQPURLEnv)
	if url == "" {
		t.Skipf("%s is not set: RabbitMQ not tested (CI sets it)", testenv.AMQPURLEnv)
	}
	cfg.AMQPURL = url
}

// removeBrokerState deletes what a test's server made on a real broker
// (its streams, named from the test's key prefix), so the machine's
// broker does not fill up with tests' orders.
func removeBrokerState(t testing.TB, cfg Config) {
	if cfg.Queue == amqpqueue.Name {
		removeRabbitMQQueues(t, cfg)
		return
	}
	if cfg.Queue != natsqueue.Name || (cfg.EmbeddedRedis() && cfg.EmbeddedSQL()) {
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

func removeRabbitMQQueues(t testing.TB, cfg Config) {
	url := cfg.AMQPURL
	if url == "" {
		url = amqpqueue.DefaultURL
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Logf("remove the test's RabbitMQ queues: %v", err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	queue := amqpqueue.QueueName(cfg.KeyPrefix)
	for _, name := range []string{queue, queue + "_dead"} {
		if _, err := ch.QueueDelete(name, false, false, false); err != nil {
			t.Logf("remove RabbitMQ queue %s: %v", name, err)
		}
	}
	ch.ExchangeDelete(queue+"_dead", false, false)
}

// testKafka is SECKILL_TEST_KAFKA_BROKERS, or an in-process kfake cluster
// of the test's own: this machine kind runs no Kafka, so kfake is the
// stand-in in CI too.
func testKafka(t testing.TB) []string {
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
