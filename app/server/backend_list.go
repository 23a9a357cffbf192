package server

import (
	"context"

	"github.com/seckill-lab/seckill/adapters/listqueue"
	"github.com/seckill-lab/seckill/core"
)

// listBackend is list: Redis List, LPUSH in the script and BRPOP.
var listBackend = Backend{
	Name:      listqueue.Name,
	Iteration: "Redis List: LPUSH in the script, BRPOP; `SECKILL_LIST_RELIABLE=1` adds BLMOVE processing lists, heartbeats and a reaper",
	Open: func(_ context.Context, d Deps) (core.Queue, error) {
		return listqueue.New(d.Redis, listqueue.Config{Key: d.QueueKey("orders:list"), Reliable: listReliable.of(d.Config),
			ConsumerPrefix: d.Config.ConsumerName}, d.Log), nil
	},
	Variables: listVariables,
	Variants:  []Variant{{Name: "list-reliable", Configure: func(c *Config) { *c = c.MustWith(string(listReliable), "1") }}},
}

var listVariables = []Variable{
	{Name: string(listReliable), Default: "`0`",
		Summary: "list backend: 1 for processing lists and the reaper",
		Meaning: "list: `1` for processing lists, heartbeats and the reaper",
		Parse:   boolSetting(false)},
}
