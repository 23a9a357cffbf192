package server

import (
	"context"

	"github.com/seckill-lab/seckill/adapters/memqueue"
	"github.com/seckill-lab/seckill/core"
)

// memoryBackend is memory: the BlockingQueue iteration.
var memoryBackend = Backend{
	Name:      memqueue.Name,
	Iteration: "BlockingQueue: a bounded in-process channel; full → 503 `busy`",
	Open: func(_ context.Context, d Deps) (core.Queue, error) {
		return memqueue.New(memqueue.Config{Capacity: memoryCapacity.of(d.Config)}, d.Log), nil
	},
	Variables: memoryVariables,
	Check:     checkMemory,
}

var memoryVariables = []Variable{
	{Name: string(memoryCapacity), Default: "`10000`",
		Summary: "memory backend: the channel's capacity",
		Meaning: "memory: the channel's capacity",
		Parse:   intSetting(10000, 1, 10_000_000)},
}

// checkMemory refuses a memory queue without a consumer in the process:
// the queue is this process's memory, which no other process can drain,
// and what it holds is gone when this one stops.
func checkMemory(c Config) error {
	if c.Queue == memqueue.Name && c.Consumers == 0 {
		return &configError{"SECKILL_CONSUMERS", "0", "SECKILL_QUEUE=memory needs a consumer in this process: its queue is this process's memory, which no other process can drain, so every order would stay queued and be lost at stop"}
	}
	return nil
}
