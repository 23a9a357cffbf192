package server

import (
	"context"

	"github.com/seckill-lab/seckill/adapters/pubsubqueue"
	"github.com/seckill-lab/seckill/core"
)

// pubsubBackend is pubsub: Redis Pub/Sub.
var pubsubBackend = Backend{
	Name:      pubsubqueue.Name,
	Iteration: "Redis Pub/Sub: PUBLISH in the script, SUBSCRIBE (loses orders by design; counted)",
	Open: func(ctx context.Context, d Deps) (core.Queue, error) {
		return pubsubqueue.New(ctx, d.Redis, pubsubqueue.Config{Channel: d.QueueKey("orders:channel"),
			PublishOnly: d.Config.Consumers == 0}, d.Log)
	},
}
