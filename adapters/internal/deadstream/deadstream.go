// Package deadstream keeps core.DeadLetter records in a Redis stream, the
// dead-letter destination of every Redis backend (<queue key>:dead).
package deadstream

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
)

// Add appends d to stream on c: a client, or a MULTI the caller also acks
// in, so a message is never both acked and not dead-lettered.
func Add(ctx context.Context, c redis.Cmdable, stream string, d core.DeadLetter) *redis.StringCmd {
	return c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: d.Fields()})
}

// Read returns up to max records of stream, oldest first.
func Read(ctx context.Context, c redis.Cmdable, stream string, max int64) ([]core.DeadLetter, error) {
	msgs, err := c.XRangeN(ctx, stream, "-", "+", max).Result()
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", stream, err)
	}
	out := make([]core.DeadLetter, 0, len(msgs))
	for _, m := range msgs {
		fields := make(map[string]string, len(m.Values))
		for k, v := range m.Values {
			s, _ := v.(string)
			fields[k] = s
		}
		d, err := core.DecodeDeadLetter(fields)
		if err != nil {
			return nil, fmt.Errorf("dead letter %s of %s: %w", m.ID, stream, err)
		}
		out = append(out, d)
	}
	return out, nil
}
