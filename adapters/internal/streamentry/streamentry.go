// Package streamentry is the layout of an order in a Redis stream entry,
// shared by the stream backends: how the reservation script adds it and
// how a consumer reads it back.
package streamentry

import (
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
)

// Field is the entry field that holds the order message.
const Field = "order"

// Handoff is the reservation script's XADD of the order to stream.
func Handoff(stream string) core.Handoff {
	return core.Handoff{
		Command: []string{"XADD", core.HandoffKey, "*", Field, core.HandoffBody},
		Key:     func(int64) string { return stream },
	}
}

// Body is the order message of an entry. A pending entry deleted from the
// stream comes back with no fields: its empty body fails to decode, and
// the pipeline dead-letters it.
func Body(m redis.XMessage) string {
	body, _ := m.Values[Field].(string)
	return body
}
