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

// Source is stream on c as a dead-letter source, named redis:<stream>;
// a record's position is its entry id.
func Source(c redis.Cmdable, stream string) core.DeadLetterSource {
	return core.DeadLetterSource{Name: "redis:" + stream, Reader: reader{c: c, stream: stream}}
}

type reader struct {
	c      redis.Cmdable
	stream string
}

// DeadLettersAfter returns up to max records after the entry id after.
func (r reader) DeadLettersAfter(ctx context.Context, after string, max int64) ([]core.DeadLetter, error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	msgs, err := r.c.XRangeN(ctx, r.stream, start, "+", max).Result()
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", r.stream, err)
	}
	out := make([]core.DeadLetter, 0, len(msgs))
	for _, m := range msgs {
		fields := make(map[string]string, len(m.Values))
		for k, v := range m.Values {
			s, _ := v.(string)
			fields[k] = s
		}
		d := core.DecodeDeadLetter(fields)
		d.Position = m.ID
		out = append(out, d)
	}
	return out, nil
}
