package server

import (
	"context"

	"github.com/seckill-lab/seckill/adapters/streamqueue"
	"github.com/seckill-lab/seckill/core"
)

// streamBackend is stream: a Redis Stream read with XREAD.
var streamBackend = Backend{
	Name:      streamqueue.Name,
	Iteration: "Redis Stream: XADD in the script, XREAD from a cursor saved after each persisted batch",
	Open: func(ctx context.Context, d Deps) (core.Queue, error) {
		return streamqueue.New(ctx, d.Redis, streamqueue.Config{Stream: d.QueueKey("orders:stream"), Reader: d.Config.ConsumerName}, d.Log)
	},
}
