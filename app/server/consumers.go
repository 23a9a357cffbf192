package server

import (
	"context"
	"log/slog"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/consumergate"
)

// orderConsumers are the order pipeline as this server runs it: a queue's
// consumers (queueConsumers), or none under a backend whose request writes
// the database itself (noConsumers, sync).
type orderConsumers interface {
	// services is what Serve runs: the consumers, unless this server runs
	// none (SECKILL_CONSUMERS=0: another process drains the queue).
	services() []core.Service
	// running is how many consumers run here.
	running() int
	// drain runs n consumers more until ctx is done (Hooks.Drain).
	drain(ctx context.Context, n int) error
}

// queueConsumers drain a queue into the database.
type queueConsumers struct {
	pipeline *core.Pipeline
	// gate holds them as an operator says (paused, capped), read from
	// Redis every 100 ms beside them.
	gate   *consumergate.Gate
	queue  core.Queue
	orders core.OrderStore
	// configured is SECKILL_CONSUMERS; batch is SECKILL_BATCH_SIZE.
	configured, batch int
	log               *slog.Logger
}

func (q queueConsumers) services() []core.Service {
	if q.configured <= 0 {
		return nil
	}
	return []core.Service{core.NewService("consumers' gate", q.gate.Run), core.NewService("pipeline", func(ctx context.Context) error {
		if err := q.pipeline.Run(ctx); err != nil {
			// The API goes on answering (a reservation needs only Redis);
			// the orders wait in the queue for a restart.
			q.log.Error("pipeline stopped; orders wait in the queue", "err", err)
			<-ctx.Done()
		}
		return nil
	})}
}

func (q queueConsumers) running() int {
	if q.configured <= 0 {
		return 0
	}
	return q.pipeline.Consumers()
}

func (q queueConsumers) drain(ctx context.Context, n int) error {
	return core.NewPipeline(q.queue, q.orders, core.PipelineConfig{Consumers: n, BatchSize: q.batch}, nil, nil).Run(ctx)
}

// noConsumers is the pipeline of a backend with no queue.
type noConsumers struct{}

func (noConsumers) services() []core.Service         { return nil }
func (noConsumers) running() int                     { return 0 }
func (noConsumers) drain(context.Context, int) error { return nil }
