// Package chanbatch reads batches from an in-process channel, for the
// backends that hold messages in process memory (memory, pubsub).
package chanbatch

import (
	"context"
	"errors"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// ErrStopped: the channel, its queue or its consumer was closed.
var ErrStopped = errors.New("stopped")

// Receive waits up to block for a first value of ch, then takes whatever
// else is ready at once, up to max values in all. It returns nothing and
// no error when block passed with nothing, ctx.Err() when ctx ended first,
// and ErrStopped when ch, queueClosed or consumerClosed was closed before a
// first value came (a closed consumer never takes another message).
func Receive[T any](ctx context.Context, ch <-chan T, queueClosed, consumerClosed <-chan struct{}, block time.Duration, max int) ([]T, error) {
	select {
	case <-queueClosed:
		return nil, ErrStopped
	case <-consumerClosed:
		return nil, ErrStopped
	default:
	}
	t := time.NewTimer(block)
	defer t.Stop()
	var first T
	select {
	case v, ok := <-ch:
		if !ok {
			return nil, ErrStopped
		}
		first = v
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-queueClosed:
		return nil, ErrStopped
	case <-consumerClosed:
		return nil, ErrStopped
	case <-t.C:
		return nil, nil
	}
	out := []T{first}
	for len(out) < max {
		select {
		case v, ok := <-ch:
			if !ok {
				return out, nil
			}
			out = append(out, v)
		default:
			return out, nil
		}
	}
	return out, nil
}

// Fetch is Receive for a consumer: each value becomes a delivery.
func Fetch[T any](ctx context.Context, ch <-chan T, queueClosed, consumerClosed <-chan struct{}, block time.Duration, max int,
	delivery func(T) core.Delivery) ([]core.Delivery, error) {
	vs, err := Receive(ctx, ch, queueClosed, consumerClosed, block, max)
	ds := make([]core.Delivery, len(vs))
	for i, v := range vs {
		ds[i] = delivery(v)
	}
	return ds, err
}
