package server

import (
	"context"
	"fmt"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/core"
)

// rabbitmqBackend is rabbitmq: a RabbitMQ quorum queue, an outside broker fed through the
// relay.
var rabbitmqBackend = Backend{
	Name:      amqpqueue.Name,
	Iteration: "RabbitMQ quorum queue, fed by a relay from the Redis outbox with publisher confirms; manual acks after the commit, a dead-letter exchange",
	Broker:    openRabbitMQ,
	Variables: rabbitmqVariables,
	Check:     checkRabbitMQ,
}

var rabbitmqVariables = []Variable{
	{Name: string(amqpURL), Default: "real servers: `amqp://guest:guest@127.0.0.1:5672/`; on the stand-ins required (refused at start without it: nothing to embed)",
		Summary: "rabbitmq backend: the broker",
		Meaning: "`rabbitmq`: the broker; its quorum queue `<prefix>orders` (`x-delivery-limit` 20, dead-lettering at least once through the exchange `<prefix>orders_dead` to the queue of that name) is declared at start; unreachable: the start stops with one line. On one node a quorum queue has no fault tolerance: run three for that",
		Parse:   brokerURL("amqp://guest:guest@127.0.0.1:5672/", "amqp", "amqps")},
}

// checkRabbitMQ refuses the stand-ins without a broker: there is none to
// embed.
func checkRabbitMQ(c Config) error {
	if c.Queue == amqpqueue.Name && c.EmbeddedRedis() && c.EmbeddedSQL() && amqpURL.of(c) == "" {
		return &configError{string(amqpURL), "", "SECKILL_QUEUE=rabbitmq needs a RabbitMQ to talk to, and the stand-ins have none to embed: set SECKILL_AMQP_URL (e.g. amqp://guest:guest@127.0.0.1:5672/)"}
	}
	return nil
}

// openRabbitMQ opens the RabbitMQ backend on SECKILL_AMQP_URL (LoadConfig
// refuses it on the stand-ins without one).
func openRabbitMQ(ctx context.Context, d Deps) (core.Queue, error) {
	url := amqpURL.of(d.Config)
	if url == "" {
		url = amqpqueue.DefaultURL
	}
	q, err := amqpqueue.New(ctx, amqpqueue.Config{URL: url, Queue: amqpqueue.QueueName(d.Config.KeyPrefix),
		ConsumerPrefix: d.Config.ConsumerName, Prefetch: 2 * max(d.Config.BatchSize, 1), Signer: d.OrderSigner()}, d.Log)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_AMQP_URL (%s): %w", redactURL(url), err)
	}
	return q, nil
}
