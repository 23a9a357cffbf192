package server

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/listqueue"
	"github.com/seckill-lab/seckill/adapters/memqueue"
	"github.com/seckill-lab/seckill/adapters/natsqueue"
	"github.com/seckill-lab/seckill/adapters/pubsubqueue"
	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/adapters/streamqueue"
	"github.com/seckill-lab/seckill/core"
)

// The built-in backends, one per iteration of the classic design. This is
// the one list of them: SECKILL_QUEUE's validation, the lab's columns, the
// metrics label and the docs' tables (held by a test) come from it.
func init() {
	Register(Backend{
		Name:      "sync",
		Iteration: "the synchronous original: no queue, the request runs the MySQL transaction (the baseline)",
		Sale: func(d Deps) (core.Reserver, core.StockBoard) {
			s := d.Store.SyncSale(d.Config.PayWindow)
			return s, s
		},
	})
	Register(Backend{
		Name:      memqueue.Name,
		Iteration: "BlockingQueue: a bounded in-process channel; full → 503 `busy`",
		Open: func(_ context.Context, d Deps) (core.Queue, error) {
			return memqueue.New(memqueue.Config{Capacity: settingOf[int](d.Config, memoryCapacityVar)}, d.Log), nil
		},
		Variables: memoryVariables,
		Check:     checkMemory,
	})
	Register(Backend{
		Name:      listqueue.Name,
		Iteration: "Redis List: LPUSH in the script, BRPOP; `SECKILL_LIST_RELIABLE=1` adds BLMOVE processing lists, heartbeats and a reaper",
		Open: func(_ context.Context, d Deps) (core.Queue, error) {
			return listqueue.New(d.Redis, listqueue.Config{Key: d.QueueKey("orders:list"), Reliable: settingOf[bool](d.Config, listReliableVar),
				ConsumerPrefix: d.Config.ConsumerName}, d.Log), nil
		},
		Variables: listVariables,
		Variants:  []Variant{{Name: "list-reliable", Configure: func(c *Config) { *c = c.MustWith(listReliableVar, "1") }}},
	})
	Register(Backend{
		Name:      pubsubqueue.Name,
		Iteration: "Redis Pub/Sub: PUBLISH in the script, SUBSCRIBE (loses orders by design; counted)",
		Open: func(ctx context.Context, d Deps) (core.Queue, error) {
			return pubsubqueue.New(ctx, d.Redis, pubsubqueue.Config{Channel: d.QueueKey("orders:channel"),
				PublishOnly: d.Config.Consumers == 0}, d.Log)
		},
	})
	Register(Backend{
		Name:      streamqueue.Name,
		Iteration: "Redis Stream: XADD in the script, XREAD from a cursor saved after each persisted batch",
		Open: func(ctx context.Context, d Deps) (core.Queue, error) {
			return streamqueue.New(ctx, d.Redis, streamqueue.Config{Stream: d.QueueKey("orders:stream"), Reader: d.Config.ConsumerName}, d.Log)
		},
	})
	Register(Backend{
		Name:      streamgroup.Name,
		Iteration: "Stream + consumer group: XREADGROUP, XACK after the commit, XAUTOCLAIM, dead letters",
		Open: func(ctx context.Context, d Deps) (core.Queue, error) {
			return streamgroup.New(ctx, d.Redis, streamgroup.Config{Stream: d.QueueKey("orders"),
				ClaimMinIdle: d.Config.ClaimMinIdle, ConsumerPrefix: d.Config.ConsumerName, Forgotten: d.Forgotten}, d.Log)
		},
	})
}

// builtinBackends are the backends this package registers, apart from any
// a program adds.
var builtinBackends []Backend

// The outside brokers, fed through the outbox and the relay
// (Backend.Broker).
func init() {
	Register(Backend{
		Name:      natsqueue.Name,
		Iteration: "NATS JetStream, fed by a relay from a Redis outbox the script writes; a durable pull consumer, ack after the commit",
		Broker:    openNATS,
		Variables: natsVariables,
	})
	Register(Backend{
		Name:      amqpqueue.Name,
		Iteration: "RabbitMQ quorum queue, fed by a relay from the Redis outbox with publisher confirms; manual acks after the commit, a dead-letter exchange",
		Broker:    openRabbitMQ,
		Variables: rabbitmqVariables,
		Check:     checkRabbitMQ,
	})
	Register(Backend{
		Name:      kafkaqueue.Name,
		Iteration: "Kafka topic keyed by voucher, fed by a relay from the Redis outbox (acks=all, idempotent producer); a consumer group committing after the commit, a dead-letter topic",
		Broker:    openKafka,
		Variables: kafkaVariables,
		Check:     checkKafka,
	})
	builtinBackends = Backends()
}

// openKafka opens the Kafka backend on SECKILL_KAFKA_BROKERS (LoadConfig
// requires them).
func openKafka(ctx context.Context, d Deps) (core.Queue, error) {
	brokers := settingOf[[]string](d.Config, kafkaBrokersVar)
	if len(brokers) == 0 {
		return nil, &configError{kafkaBrokersVar, "", "SECKILL_QUEUE=kafka needs the brokers (host:port, comma-separated)"}
	}
	tlsConfig, mechanism := kafkaSecurity(d.Config)
	var hooks []kgo.Hook
	if d.Tracer != nil {
		// franz-go's own instrumentation: a publish span per record in
		// its order's trace, a receive span per record that carries one.
		hooks = kotel.NewKotel(kotel.WithTracer(kotel.NewTracer(kotel.TracerProvider(d.Tracer),
			kotel.TracerPropagator(propagation.TraceContext{})))).Hooks()
	}
	q, err := kafkaqueue.New(ctx, kafkaqueue.Config{Brokers: brokers, Topic: kafkaqueue.TopicName(d.Config.KeyPrefix),
		ConsumerPrefix: d.Config.ConsumerName, Signer: d.OrderSigner(), TLS: tlsConfig, SASL: mechanism, Hooks: hooks}, d.Log)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_KAFKA_BROKERS: %w", err)
	}
	return q, nil
}

// openRabbitMQ opens the RabbitMQ backend on SECKILL_AMQP_URL (LoadConfig
// refuses it on the stand-ins without one).
func openRabbitMQ(ctx context.Context, d Deps) (core.Queue, error) {
	url := settingOf[string](d.Config, amqpURLVar)
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

// openNATS opens the JetStream backend on SECKILL_NATS_URL, or, with the
// stand-ins and no URL, on a NATS server embedded in this process.
func openNATS(ctx context.Context, d Deps) (core.Queue, error) {
	cfg := natsqueue.Config{Stream: natsqueue.StreamName(d.Config.KeyPrefix),
		ConsumerPrefix: d.Config.ConsumerName, AckWait: d.Config.ClaimMinIdle, Signer: d.OrderSigner(),
		Credentials: settingOf[string](d.Config, natsCredsVar)}
	url := settingOf[string](d.Config, natsURLVar)
	if url == "" && d.Config.EmbeddedRedis() && d.Config.EmbeddedSQL() {
		q, err := natsqueue.NewEmbedded(ctx, cfg, d.Log)
		if err != nil {
			return nil, err
		}
		d.Log.Info("NATS: a JetStream server embedded in this process (a stand-in: its orders do not outlive the process); set SECKILL_NATS_URL for a real one")
		return q, nil
	}
	if url == "" {
		url = natsqueue.DefaultURL
	}
	cfg.URL = url
	q, err := natsqueue.New(ctx, cfg, d.Log)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_NATS_URL (%s): %w", redactURL(url), err)
	}
	return q, nil
}
