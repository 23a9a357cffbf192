package server

import (
	"context"

	"github.com/seckill-lab/seckill/adapters/streamgroup"
	"github.com/seckill-lab/seckill/core"
)

// streamgroupBackend is streamgroup: a Redis Stream read by a consumer group, the default.
var streamgroupBackend = Backend{
	Name:      streamgroup.Name,
	Iteration: "Stream + consumer group: XREADGROUP, XACK after the commit, XAUTOCLAIM, dead letters",
	Open: func(ctx context.Context, d Deps) (core.Queue, error) {
		return streamgroup.New(ctx, d.Redis, streamgroup.Config{Stream: d.QueueKey("orders"),
			ClaimMinIdle: d.Config.ClaimMinIdle, ConsumerPrefix: d.Config.ConsumerName, Forgotten: d.Forgotten}, d.Log)
	},
}
